"""Checks of matplotlib figures by their artists and extents (shared by the report and notebook tests)."""

import itertools

from matplotlib.colors import to_hex


def drawn(fig):
    """Lay out and draw ``fig`` on an Agg canvas; its renderer, for the extents of its artists."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _legends(fig):
    return list(fig.legends) + [ax.get_legend() for ax in fig.get_axes() if ax.get_legend() is not None]


def assert_legend_clear(fig):
    """The figure has one legend; it is inside the figure and overlaps no panel (data, ticks,
    axis labels, panel titles) and no figure title."""
    r = drawn(fig)
    (legend,) = _legends(fig)
    box = legend.get_window_extent(r)
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
    for ax in fig.get_axes():
        assert not box.overlaps(ax.get_tightbbox(r)), ax.get_title()
    titles = [t for t in fig.texts if t.get_text()] + ([fig._suptitle] if fig._suptitle else [])
    for t in titles:
        assert not box.overlaps(t.get_window_extent(r)), t.get_text()
    assert all(t.get_fontsize() >= 8 for t in legend.get_texts())
    return legend


def styles_by_label(fig):
    """label -> set of (colour, marker) over every panel of ``fig``."""
    out = {}
    for ax in fig.get_axes():
        for ln in ax.get_lines():
            out.setdefault(ln.get_label(), set()).add((to_hex(ln.get_color()), ln.get_marker()))
    return out


def copy_bars(fig, result):
    """For each copy kind of ``result``: its bars in the figure's Gantt panel, by start time, after
    checking there is one bar per copy and that touching neighbours differ in colour."""
    gantt = fig.get_axes()[0]
    out = {}
    for kind, name in (("d2h", "swap out (D2H)"), ("h2d", "swap in (H2D)")):
        copies = [e for e in result.events if e.kind == kind]
        bars = [c for c in gantt.containers if c.get_label() == name]
        if not copies:
            assert not bars, name
            continue
        (bars,) = bars
        assert len(bars) == len(copies), name
        rects = sorted(bars, key=lambda b: b.get_x())
        touching = [(a, b) for a, b in itertools.pairwise(rects) if b.get_x() - (a.get_x() + a.get_width()) < 1e-9]
        assert all(to_hex(a.get_facecolor()) != to_hex(b.get_facecolor()) for a, b in touching), name
        out[kind] = (rects, touching)
    return out
