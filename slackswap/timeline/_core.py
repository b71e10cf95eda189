"""The compiled core of the simulator: the rules of ``schedule.compile_schedule`` and of the
reference simulator (``reference.py``) on integer arrays, in two numba-compiled functions.

``compile_core`` turns the decisions into the step sequence and the fixed lifetimes (docs/timeline.md,
"Steps" to "Backward: recompute, prefetch, gradients"), ``time_core`` gives every step and copy its times, the issue points, the waits and
the memory curve (sections 3-4). Both follow the reference step by step; where they compute
something differently (an explicit stack for the recursion of ``need``, difference arrays for
memory, a heap for the pending D2H sources, a max segment tree for the default issue points, a
counting sort for the memory events) the comments say why the result is the same. The arrays of a
graph and of a cost model are built once per object (``graph_arrays``, ``cost_arrays``).

Memory is counted in int64 (bytes are whole numbers, and the reference's float64 sums of them are
exact below 2**53); times are float64 and summed in the reference's order, so they are equal.
``cache=True``: the machine code is written next to this file (or to numba's user cache) by the
first process and loaded by later ones; ``NUMBA_DISABLE_JIT=1`` runs the same code as Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.plan import Decision

# step kinds (schedule.FWD, REC, BWD, OPT)
K_FWD, K_REC, K_BWD, K_OPT = 0, 1, 2, 3
# decision codes; a tensor no plan decides (an unsaved intermediate) is treated as RECOMPUTE,
# as in compile_schedule
D_OTHER, D_KEEP, D_SWAP = 0, 1, 2
_EPS = 1e-9   # reference._EPS: bytes compared with the budget


def _csr(rows):
    """Compressed rows: (pointer, indices) with row i at indices[pointer[i]:pointer[i + 1]]."""
    ptr = np.zeros(len(rows) + 1, np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    idx = np.fromiter((x for r in rows for x in r), np.int64, int(ptr[-1]))
    return ptr, idx


class GraphArrays:
    """The arrays of one ``Graph`` that the core reads (built once, ``graph_arrays``)."""

    def __init__(self, g):
        ts = g.tensors
        self.n = len(g.ops)
        self.producer = np.array([-1 if t.producer is None else t.producer for t in ts], np.int64)
        self.bytes = np.array([t.bytes for t in ts], np.int64)
        self.requires_grad = np.array([t.requires_grad for t in ts], np.bool_)
        self.last_fwd = np.array([g.last_forward_use(t.id) for t in ts], np.int64)
        # inputs and saves without repeats, in first-occurrence order (dict.fromkeys in the reference)
        self.in_ptr, self.in_idx = _csr([tuple(dict.fromkeys(op.inputs)) for op in g.ops])
        self.out_ptr, self.out_idx = _csr([op.outputs for op in g.ops])
        self.sv_ptr, self.sv_idx = _csr([tuple(dict.fromkeys(op.saves)) for op in g.ops])
        self.ws = np.array([op.workspace_bytes for op in g.ops], np.int64)
        self.op_names = [op.name for op in g.ops]


class CostArrays:
    """The arrays of one ``CostModel`` and its time tolerance (built once, ``cost_arrays``)."""

    def __init__(self, c, tol: float):
        self.fwd = np.asarray(c.fwd_s, np.float64)
        self.bwd = np.asarray(c.bwd_s, np.float64)
        self.d2h = np.asarray(c.d2h_s, np.float64)
        self.h2d = np.asarray(c.h2d_s, np.float64)
        self.opt = float(c.optimizer_s)
        self.duplex = float(c.duplex_factor)
        self.tol = tol
        self.ideal = c.ideal_step_s


def _cached(obj, key: str, build):
    """``build(obj)`` stored on the (frozen) object, as ``functools.cached_property`` does."""
    d = obj.__dict__
    v = d.get(key)
    if v is None:
        v = d[key] = build(obj)
    return v


def graph_arrays(g) -> GraphArrays:
    return _cached(g, "_sim_core_arrays", GraphArrays)


def cost_arrays(c, tol_of) -> CostArrays:
    return _cached(c, "_sim_core_arrays", lambda c: CostArrays(c, tol_of(c)))


#: Decision -> the core's code
DECISION_CODE = {Decision.KEEP: D_KEEP, Decision.SWAP: D_SWAP, Decision.RECOMPUTE: D_OTHER}


def _ints(values, count: int) -> np.ndarray:
    return np.fromiter(values, np.int64, count)


def encode(ga: GraphArrays, decisions: dict, hold_points: dict | None = None):
    """What the core reads of a plan: ``(codes, dec, hold)``, the decision codes in the plan's
    order, every tensor's code (``D_OTHER`` where nothing decides it: treated as RECOMPUTE) and
    every tensor's hold stage (``n - 1`` where none is given)."""
    nt = len(ga.producer)
    codes = _ints(map(DECISION_CODE.__getitem__, decisions.values()), len(decisions))
    dec = np.zeros(nt, np.int64)
    dec[_ints(decisions.keys(), len(decisions))] = codes
    hold = np.full(nt, ga.n - 1, np.int64)
    if hold_points:
        hold[_ints(hold_points.keys(), len(hold_points))] = _ints(hold_points.values(), len(hold_points))
    return codes, dec, hold


def compile_plan(ga: GraphArrays, dec, hold):
    """``compile_core`` of ``graph_arrays`` under the tensor codes ``dec`` and hold stages ``hold``."""
    return compile_core(ga.n, ga.producer, ga.bytes, ga.requires_grad, ga.last_fwd, ga.in_ptr,
                        ga.in_idx, ga.out_ptr, ga.out_idx, ga.sv_ptr, ga.sv_idx, ga.ws, dec, hold)


def decision_counts(codes) -> dict[str, int]:
    """``plan.counts()`` from the decision codes of ``encode``."""
    c = np.bincount(codes, minlength=3)
    return {Decision.KEEP.value: int(c[D_KEEP]), Decision.SWAP.value: int(c[D_SWAP]),
            Decision.RECOMPUTE.value: int(c[D_OTHER])}


@njit(cache=True)
def _grow(a, k):
    """``a`` with room for index ``k`` (at least doubled when full)."""
    if k < a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0] + 16, k + 1), np.int64)
    for i in range(a.shape[0]):     # a loop, not ``b[:m] = a``: numba compiles that for seconds
        b[i] = a[i]
    return b


@njit(cache=True)
def _forward_intervals(n, producer, tbytes, last_fwd, ws, dec, iva, ivf, ivb):
    """The forward's fixed intervals written into ``iva``/``ivf``/``ivb`` from 0: workspaces, then
    the tensors neither kept nor swapped, freed after their last forward use. Returns their count
    and which tensors are resident (inputs and kept ones)."""
    nt = producer.shape[0]
    ni = 0
    for i in range(n):
        if ws[i] != 0:
            iva[ni] = i
            ivf[ni] = i
            ivb[ni] = ws[i]
            ni += 1
    resident = np.zeros(nt, np.bool_)
    for t in range(nt):
        p = producer[t]
        if p < 0 or dec[t] == D_KEEP:
            resident[t] = True
        elif dec[t] != D_SWAP:
            iva[ni] = p
            ivf[ni] = max(last_fwd[t], p)
            ivb[ni] = tbytes[t]
            ni += 1
    return ni, resident


@njit(cache=True)
def _lifetimes(producer, tbytes, dec, alloc, last_use, s_opt, iva, ivf, ivb, ni):
    """The intervals that follow from the uses, appended after the first ``ni``: inputs until the
    optimizer step, kept tensors until their last use, a regenerated tensor's last backward copy
    until its last read. Returns the (grown) arrays and the new count."""
    nt = producer.shape[0]
    iva = _grow(iva, ni + 2 * nt)
    ivf = _grow(ivf, iva.shape[0] - 1)
    ivb = _grow(ivb, iva.shape[0] - 1)
    for t in range(nt):
        a = -1
        f = -1
        if producer[t] < 0:
            a = 0
            f = s_opt
        elif dec[t] == D_KEEP:
            a = producer[t]
            f = last_use[t] if last_use[t] >= 0 else a
        elif alloc[t] >= 0:            # the last backward copy: until its last read
            a = alloc[t]
            f = last_use[t]
        if a >= 0:
            iva[ni] = a
            ivf[ni] = f
            ivb[ni] = tbytes[t]
            ni += 1
    return iva, ivf, ivb, ni


@njit(cache=True)
def compile_core(n, producer, tbytes, requires_grad, last_fwd, in_ptr, in_idx, out_ptr, out_idx,
                 sv_ptr, sv_idx, ws, dec, hold):
    """``compile_schedule`` on arrays. ``dec[t]``: D_KEEP, D_SWAP or D_OTHER; ``hold[t]``: hold
    point (n - 1 when none).

    Returns the steps (kind, op, stage), ``need_pos`` (per step: the largest H2D-queue position of
    a swapped tensor it uses, -1 if none), ``stage_first`` (first step of every stage), the fixed
    intervals (first step, last step, bytes), the first and last backward use of every tensor
    (-1: none) and the H2D queue (swapped tensors in order of first use, then of position in what
    that step reads: the order in which the uses are met here)."""
    nt = producer.shape[0]
    cap = 2 * n + 8
    kind = np.empty(cap, np.int64)
    op = np.empty(cap, np.int64)
    stage = np.empty(cap, np.int64)
    need_pos = np.empty(cap, np.int64)
    for i in range(n):
        kind[i] = K_FWD
        op[i] = i
        stage[i] = n
        need_pos[i] = -1
    ns = n
    iva = np.empty(2 * n + nt + 8, np.int64)
    ivf = np.empty(iva.shape[0], np.int64)
    ivb = np.empty(iva.shape[0], np.int64)
    ni = 0

    # ---- forward: workspaces, then the tensors freed after their last forward use ----
    ni, resident = _forward_intervals(n, producer, tbytes, last_fwd, ws, dec, iva, ivf, ivb)

    # ---- backward: stages n-1 .. 0 ----
    first_use = np.full(nt, -1, np.int64)
    last_use = np.full(nt, -1, np.int64)
    alloc = np.full(nt, -1, np.int64)        # step of the current backward copy of a regenerated tensor
    hpos = np.full(nt, -1, np.int64)         # position in the H2D queue
    hq = np.empty(nt, np.int64)
    nh = 0
    grad_from = np.full(nt, -1, np.int64)
    stage_first = np.full(n, -1, np.int64)
    transient = np.empty(nt, np.int64)
    ntr = 0
    # need() of the reference, without recursion: a frame is (op to re-run, next input to make
    # available). Frames form a chain of ancestors, so at most n are open.
    st_op = np.empty(n + 1, np.int64)
    st_in = np.empty(n + 1, np.int64)
    for j in range(n - 1, -1, -1):
        for si in range(sv_ptr[j], sv_ptr[j + 1]):
            t = sv_idx[si]
            if resident[t]:
                continue
            if dec[t] == D_SWAP:
                resident[t] = True
                continue
            st_op[0] = producer[t]
            st_in[0] = in_ptr[producer[t]]
            sp = 1
            while sp > 0:
                p = st_op[sp - 1]
                i = st_in[sp - 1]
                if i < in_ptr[p + 1]:          # make input i of p available first
                    st_in[sp - 1] = i + 1
                    x = in_idx[i]
                    if resident[x]:
                        continue
                    if dec[x] == D_SWAP:
                        resident[x] = True
                        continue
                    st_op[sp] = producer[x]
                    st_in[sp] = in_ptr[producer[x]]
                    sp += 1
                    continue
                sp -= 1                         # every input available: re-run p as step s
                s = ns
                ns += 1
                kind = _grow(kind, s)
                op = _grow(op, s)
                stage = _grow(stage, s)
                need_pos = _grow(need_pos, s)
                kind[s] = K_REC
                op[s] = p
                stage[s] = j
                need_pos[s] = -1
                if stage_first[j] < 0:
                    stage_first[j] = s
                for ii in range(in_ptr[p], in_ptr[p + 1]):
                    nh = _use(in_idx[ii], s, dec, first_use, last_use, hpos, hq, nh, need_pos)
                for oi in range(out_ptr[p], out_ptr[p + 1]):
                    y = out_idx[oi]
                    if resident[y] or dec[y] == D_SWAP or dec[y] == D_KEEP:
                        continue
                    resident[y] = True
                    if alloc[y] >= 0:   # the previous copy lived until its last read before now
                        iva = _grow(iva, ni)
                        ivf = _grow(ivf, ni)
                        ivb = _grow(ivb, ni)
                        iva[ni] = alloc[y]
                        ivf[ni] = last_use[y]
                        ivb[ni] = tbytes[y]
                        ni += 1
                    alloc[y] = s
                    if j > hold[y]:
                        transient[ntr] = y
                        ntr += 1
                    nh = _use(y, s, dec, first_use, last_use, hpos, hq, nh, need_pos)
                if ws[p] != 0:
                    iva = _grow(iva, ni)
                    ivf = _grow(ivf, ni)
                    ivb = _grow(ivb, ni)
                    iva[ni] = s
                    ivf[ni] = s
                    ivb[ni] = ws[p]
                    ni += 1
        s = ns                                  # the backward step of op j
        ns += 1
        kind = _grow(kind, s)
        op = _grow(op, s)
        stage = _grow(stage, s)
        need_pos = _grow(need_pos, s)
        kind[s] = K_BWD
        op[s] = j
        stage[s] = j
        need_pos[s] = -1
        if stage_first[j] < 0:
            stage_first[j] = s
        for si in range(sv_ptr[j], sv_ptr[j + 1]):
            nh = _use(sv_idx[si], s, dec, first_use, last_use, hpos, hq, nh, need_pos)
        for ii in range(in_ptr[j], in_ptr[j + 1]):
            x = in_idx[ii]
            if requires_grad[x] and grad_from[x] < 0:
                grad_from[x] = s
        iva = _grow(iva, ni + out_ptr[j + 1] - out_ptr[j] + 1)
        ivf = _grow(ivf, iva.shape[0] - 1)
        ivb = _grow(ivb, iva.shape[0] - 1)
        for oi in range(out_ptr[j], out_ptr[j + 1]):
            y = out_idx[oi]
            if grad_from[y] >= 0:
                iva[ni] = grad_from[y]
                ivf[ni] = s
                ivb[ni] = tbytes[y]
                ni += 1
        if ws[j] != 0:
            iva[ni] = s
            ivf[ni] = s
            ivb[ni] = ws[j]
            ni += 1
        for k in range(ntr):
            resident[transient[k]] = False
        ntr = 0
    s_opt = ns
    ns += 1
    kind = _grow(kind, s_opt)
    op = _grow(op, s_opt)
    stage = _grow(stage, s_opt)
    need_pos = _grow(need_pos, s_opt)
    kind[s_opt] = K_OPT
    op[s_opt] = -1
    stage[s_opt] = -1
    need_pos[s_opt] = -1

    # ---- lifetimes from uses ----
    iva, ivf, ivb, ni = _lifetimes(producer, tbytes, dec, alloc, last_use, s_opt, iva, ivf, ivb, ni)
    return (kind[:ns], op[:ns], stage[:ns], need_pos[:ns], stage_first, iva[:ni], ivf[:ni],
            ivb[:ni], first_use, last_use, hq[:nh])


@njit(cache=True)
def _use(t, s, dec, first_use, last_use, hpos, hq, nh, need_pos):
    """Step ``s`` reads tensor ``t``: record the use; a swapped tensor met for the first time joins
    the H2D queue. Returns the new length of the queue."""
    if first_use[t] < 0:
        first_use[t] = s
        if dec[t] == D_SWAP:
            hpos[t] = nh
            hq[nh] = t
            nh += 1
    last_use[t] = s
    if dec[t] == D_SWAP and hpos[t] > need_pos[s]:
        need_pos[s] = hpos[t]
    return nh


@njit(cache=True)
def _heap_push(h, m, x):
    h[m] = x
    i = m
    while i > 0:
        parent = (i - 1) // 2
        if h[parent] <= h[i]:
            break
        h[parent], h[i] = h[i], h[parent]
        i = parent
    return m + 1


@njit(cache=True)
def _heap_pop(h, m):
    """Remove the smallest of ``h[:m]``; returns the new size (the smallest was ``h[0]``)."""
    m -= 1
    h[0] = h[m]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= m:
            break
        if a + 1 < m and h[a + 1] < h[a]:
            a += 1
        if h[i] <= h[a]:
            break
        h[i], h[a] = h[a], h[i]
        i = a
    return m


@njit(cache=True)
def _default_issue_points(n, hq, sw_f, sw_u, stage, stage_first, tbytes, fixed, issue, n_open,
                          finite, limit, sw_lf):
    """Fill ``issue`` for the copies back the plan left open (``reference.default_issue_points``):
    for each in H2D-queue order, the earliest stage from which the copy fits the budget over the
    memory so far (``fixed`` plus the copies placed), never before the previous copy's, nor
    before the step after the tensor's last forward use (``sw_lf``; on one micro-batch every
    backward stage is, on a pipeline stage a later micro-batch's forward may come after a stage)."""
    nh = hq.shape[0]
    if n_open > 0:
        # memory so far (fixed plus the copies placed): a max segment tree, read and updated only
        # under a finite budget
        mx, ad, size_p = _tree(fixed if finite else fixed[:0])
        depth = 1
        while (1 << depth) <= size_p:
            depth += 1
        stack = np.empty(4 * (2 * depth + 2), np.int64)
        k_prev = n - 1
        for hi in range(nh):
            t = hq[hi]
            f = sw_f[t]
            size = tbytes[t]
            if issue[t] >= 0:
                k = issue[t]
            else:
                ju = stage[sw_u[t]]
                k = ju
                kcap = k_prev
                x = sw_lf[t] + 1
                if x > stage_first[kcap]:   # (a pipeline stage) the stage starting at x, or after it
                    kcap = stage[x] if stage_first[stage[x]] == x else stage[x] - 1
                if not finite:
                    k = kcap
                else:
                    # the earliest step a0 in [lo, f] with max(mem[a0..f]) + size <= budget: the
                    # condition holds on a suffix of [lo, f], which starts after the last step
                    # where it fails (-1: none fits, even at f)
                    lo = stage_first[kcap]
                    j = _last_over(mx, ad, size_p, lo, f, size, limit, stack)
                    a0 = lo if j < 0 else (-1 if j == f else j + 1)
                    if a0 >= 0:
                        k0 = stage[a0]
                        k = k0 if stage_first[k0] == a0 else k0 - 1
                        k = max(min(k, kcap), ju)
                        if stage_first[k] > stage_first[ju]:
                            k = ju
                k = max(min(k, kcap), ju)
                issue[t] = k
            if finite:
                _tree_add(mx, ad, size_p, stage_first[k], f + 1, size)
            k_prev = k


@njit(cache=True)
def _memory_curve(steps, iva, ivf, ivb, tbytes, producer, sw_lf, sw_f, hq, qpos, S, E, d2h_end,
                  h2d_start, tol):
    """The memory curve of ``time_core`` (actual times; frees before allocations at equal times),
    as ``(times, curve)``."""
    nt = tbytes.shape[0]
    nh = hq.shape[0]
    # Events at a step's start or end (allocations at S[a], frees at E[f]) are put in time order
    # by a counting sort on 2 * step (+1 for an end): S[0] <= E[0] <= S[1] <= ... Only the release
    # of a swapped source (at max(E[lf], end of its copy)) and the start of an H2D copy fall
    # elsewhere; they are sorted apart and merged in. So the curve costs time linear in the events.
    nb = 2 * steps
    cnt = np.zeros(nb + 1, np.int64)
    n_other = 0
    for i in range(ivb.shape[0]):
        if ivb[i] != 0:
            cnt[2 * iva[i] + 1] += 1
            cnt[2 * ivf[i] + 2] += 1
    for t in range(nt):
        if sw_lf[t] >= 0:
            cnt[2 * producer[t] + 1] += 1
            n_other += 1
    for hi in range(nh):
        cnt[2 * sw_f[hq[hi]] + 2] += 1
        n_other += 1
    for i in range(nb):
        cnt[i + 1] += cnt[i]
    st = np.empty(cnt[nb], np.float64)         # step events in time order
    sb = np.empty(cnt[nb], np.int64)
    for i in range(ivb.shape[0]):
        if ivb[i] != 0:
            k = cnt[2 * iva[i]]
            st[k] = S[iva[i]]
            sb[k] = ivb[i]
            cnt[2 * iva[i]] += 1
            k = cnt[2 * ivf[i] + 1]
            st[k] = E[ivf[i]]
            sb[k] = -ivb[i]
            cnt[2 * ivf[i] + 1] += 1
    ot = np.empty(n_other, np.float64)         # the other events
    ob = np.empty(n_other, np.int64)
    e = 0
    for t in range(nt):
        if sw_lf[t] >= 0:
            k = cnt[2 * producer[t]]
            st[k] = S[producer[t]]
            sb[k] = tbytes[t]
            cnt[2 * producer[t]] += 1
            ot[e] = max(E[sw_lf[t]], d2h_end[qpos[t]])
            ob[e] = -tbytes[t]
            e += 1
    for hi in range(nh):
        t = hq[hi]
        k = cnt[2 * sw_f[t] + 1]
        st[k] = E[sw_f[t]]
        sb[k] = -tbytes[t]
        cnt[2 * sw_f[t] + 1] += 1
        ot[e] = h2d_start[hi]
        ob[e] = tbytes[t]
        e += 1
    o = _argsort(ot)
    ne = st.shape[0] + n_other
    tt = np.empty(ne, np.float64)
    bb = np.empty(ne, np.int64)
    a = 0
    b = 0
    for e in range(ne):
        if b == n_other or (a < st.shape[0] and st[a] <= ot[o[b]]):
            tt[e] = st[a]
            bb[e] = sb[a]
            a += 1
        else:
            tt[e] = ot[o[b]]
            bb[e] = ob[o[b]]
            b += 1
    return _curve(tt, bb, tol)


@njit(cache=True)
def time_core(n, kind, op, stage, need_pos, stage_first, iva, ivf, ivb, tbytes, producer,
              sw_lf, sw_u, sw_f, hq, q, given_t, given_k, fwd, bwd, d2h_s, h2d_s, opt_s, duplex,
              budget, tol, arr_fix, arr_from, arr_add):
    """The timing pass of the reference ``simulate``.

    ``n``: the number of issue stages (the backward stages; one step's graph: its ops); stages
    are numbered ``n - 1 .. 0`` along the steps, steps before the first backward stage have
    stage ``n``. Swapped tensors are those with ``sw_lf[t] >= 0`` (last forward-use step; the
    step that produces it is ``producer[t]``: on one micro-batch the producing op's id, on a
    pipeline its forward step, ``pipeline.py``); ``sw_u[t]`` / ``sw_f[t]`` are their first and
    last backward use (-1: none), ``hq`` the H2D queue, ``q`` the D2H queue. ``given_t`` /
    ``given_k``: the plan's issue points, in the plan's order.

    Arrivals (a pipeline stage; empty arrays: none): step ``s`` may not start before
    ``arr_fix[s]`` nor, when ``arr_from[s] >= 0``, before ``E[arr_from[s]] + arr_add[s]``; the
    wait until then is bubble, any wait beyond it stall.

    Returns ``(code, a, x, S, E, d2h_start, d2h_end, h2d_start, h2d_end, issue, stall_f, stall_b,
    recompute, bubble, times, curve)``: code 0 feasible; 1 issue point ``given_t[a]`` after the
    first use (stage ``x``); 2 infeasible at step ``a`` needing ``x`` bytes; 3 the D2H order makes
    tensor ``a`` wait for a copy that has not started.
    """
    steps = kind.shape[0]
    nt = tbytes.shape[0]
    nq = q.shape[0]
    nh = hq.shape[0]
    finite = budget < np.inf
    limit = budget + _EPS
    empty = np.zeros(0, np.float64)
    S = np.zeros(steps, np.float64)
    E = np.zeros(steps, np.float64)
    issue = np.full(nt, -1, np.int64)

    # ---- issue points given by the plan: each at or before its first use ----
    for i in range(given_t.shape[0]):
        t = given_t[i]
        ju = stage[sw_u[t]]
        if given_k[i] < ju:
            return (1, i, float(ju), S, E, empty, empty, empty, empty, issue, 0.0, 0.0, 0.0,
                    0.0, empty, np.zeros(0, np.int64))
        issue[t] = given_k[i]

    # ---- fixed memory: intervals plus swapped tensors' forward lives (difference array) ----
    diff = np.zeros(steps + 1, np.int64)
    for i in range(iva.shape[0]):
        diff[iva[i]] += ivb[i]
        diff[ivf[i] + 1] -= ivb[i]
    for t in range(nt):
        if sw_lf[t] >= 0:
            diff[producer[t]] += tbytes[t]
            diff[sw_lf[t] + 1] -= tbytes[t]
    fixed = np.cumsum(diff[:steps])

    # ---- default issue points (reference.default_issue_points) for the copies left open ----
    _default_issue_points(n, hq, sw_f, sw_u, stage, stage_first, tbytes, fixed, issue,
                          nh - given_t.shape[0], finite, limit, sw_lf)

    # ---- accounted memory: fixed plus every copy back from its issue stage to its last use ----
    diff.fill(0)
    for hi in range(nh):
        t = hq[hi]
        diff[stage_first[issue[t]]] += tbytes[t]
        diff[sw_f[t] + 1] -= tbytes[t]
    acc = fixed + np.cumsum(diff[:steps])

    # ---- D2H queue; the sources that become pending at each step (CSR by step) ----
    qpos = np.full(nt, -1, np.int64)
    for i in range(nq):
        qpos[q[i]] = i
    pptr = np.zeros(steps + 2, np.int64)
    for t in range(nt):
        if sw_lf[t] >= 0:
            pptr[sw_lf[t] + 2] += 1
    for s in range(steps + 1):
        pptr[s + 1] += pptr[s]
    pidx = np.empty(pptr[steps + 1], np.int64)
    fill = pptr.copy()
    for t in range(nt):
        if sw_lf[t] >= 0:
            pidx[fill[sw_lf[t] + 1]] = t
            fill[sw_lf[t] + 1] += 1
    d2h_start = np.full(nq, np.nan)
    d2h_end = np.full(nq, np.nan)
    h2d_start = np.full(nh, np.nan)
    h2d_end = np.full(nh, np.nan)
    ready = np.zeros(steps, np.float64)
    # pending sources (forward use over, not yet released) as queue positions; the reference keeps
    # them in a sorted list and takes the smallest first: a heap does the same
    heap = np.empty(nq + 1, np.int64)
    m = 0
    pend_bytes = 0.0
    qi = 0
    hq_next = 0
    prev_d2h = 0.0
    prev_h2d = 0.0
    stall_f = 0.0
    stall_b = 0.0
    bubble = 0.0
    has_arr = arr_fix.shape[0] > 0
    t_prev = 0.0
    for s in range(steps):
        for pi in range(pptr[s], pptr[s + 1]):
            t = pidx[pi]
            m = _heap_push(heap, m, qpos[t])
            pend_bytes += tbytes[t]
        reached = t_prev
        while m > 0 and not np.isnan(d2h_end[heap[0]]) and d2h_end[heap[0]] <= reached + tol:
            pend_bytes -= tbytes[q[heap[0]]]
            m = _heap_pop(heap, m)
        need = acc[s] + pend_bytes
        start = reached
        while need > limit:
            if m == 0 or np.isnan(d2h_end[heap[0]]):
                return (2, s, need, S, E, empty, empty, empty, empty, issue, 0.0, 0.0, 0.0,
                        0.0, empty, np.zeros(0, np.int64))
            i = heap[0]
            m = _heap_pop(heap, m)
            start = max(start, d2h_end[i])
            pend_bytes -= tbytes[q[i]]
            need -= tbytes[q[i]]
        ready[s] = start
        # H2D copies up to the last one this step uses (FIFO); their ends never decrease along
        # the queue, so the step waits for the end of that last one
        last = need_pos[s]
        while hq_next <= last:
            x = hq[hq_next]
            i = qpos[x]
            if np.isnan(d2h_end[i]):
                return (3, x, 0.0, S, E, empty, empty, empty, empty, issue, 0.0, 0.0, 0.0,
                        0.0, empty, np.zeros(0, np.int64))
            hs = max(ready[stage_first[issue[x]]], d2h_end[i], prev_h2d)
            dur = h2d_s[x]
            if duplex < 1:
                # is the D2H engine copying at hs? copies are FIFO, so starts are sorted
                b = _last_at_most(d2h_start, qi, hs)
                if b >= 0 and d2h_end[b] > hs + tol:
                    dur /= duplex
            h2d_start[hq_next] = hs
            h2d_end[hq_next] = hs + dur
            prev_h2d = hs + dur
            hq_next += 1
        if last >= 0:
            start = max(start, h2d_end[last])
        wait = 0.0
        if has_arr:    # a pipeline stage: the wait for an arrival is bubble, the rest stall
            a = arr_fix[s]
            if arr_from[s] >= 0:
                a = max(a, E[arr_from[s]] + arr_add[s])
            if a > t_prev:
                wait = a - t_prev
                bubble += wait
            start = max(start, a)
        S[s] = start
        k = kind[s]
        if k == K_FWD or k == K_REC:
            dur = fwd[op[s]]
        elif k == K_BWD:
            dur = bwd[op[s]]
        else:
            dur = opt_s
        E[s] = start + dur
        if k == K_FWD:
            stall_f += start - t_prev - wait
        else:
            stall_b += start - t_prev - wait
        t_prev = E[s]
        if k == K_FWD:   # copies of this step's swapped outputs (and any now unblocked) join the queue
            while qi < nq and producer[q[qi]] <= s:
                ds = max(E[producer[q[qi]]], prev_d2h)
                d2h_start[qi] = ds
                d2h_end[qi] = ds + d2h_s[q[qi]]
                prev_d2h = d2h_end[qi]
                qi += 1
    recompute = 0.0
    for s in range(steps):
        if kind[s] == K_REC:
            recompute += E[s] - S[s]

    times, curve = _memory_curve(steps, iva, ivf, ivb, tbytes, producer, sw_lf, sw_f, hq, qpos, S, E,
                                 d2h_end, h2d_start, tol)
    return (0, 0, 0.0, S, E, d2h_start, d2h_end, h2d_start, h2d_end, issue, stall_f, stall_b,
            recompute, bubble, times, curve)


@njit(cache=True)
def _last_at_most(a, m, x):
    """The largest ``i < m`` with ``a[i] <= x`` (``a[:m]`` sorted), -1 if none: a binary search,
    ``np.searchsorted(a[:m], x, side="right") - 1`` without its compile time."""
    lo = 0
    hi = m
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True)
def _argsort(keys):
    """A stable argsort of ``keys`` (a bottom-up merge sort): the same order as
    ``np.argsort(keys, kind="stable")``, in a few lines that numba compiles in a fraction of a
    second where ``np.argsort`` takes seconds per kind and dtype."""
    n = keys.shape[0]
    a = np.empty(n, np.int64)
    for i in range(n):
        a[i] = i
    b = np.empty(n, np.int64)
    w = 1
    while w < n:
        for lo in range(0, n, 2 * w):
            mid = min(lo + w, n)
            hi = min(lo + 2 * w, n)
            i = lo
            j = mid
            for k in range(lo, hi):
                if i < mid and (j >= hi or keys[a[i]] <= keys[a[j]]):
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
        a, b = b, a
        w *= 2
    return a


@njit(cache=True)
def _curve(ts, bs, tol):
    """The reference's memory curve from events sorted by time (``ts``, ``bs``; reordered in
    place): times within ``tol`` of the previous one form a group, each group ordered by bytes
    (frees first), then by time; times made non-decreasing, bytes summed.

    The reference sorts stably by time, then stably by (group, bytes). Its result depends only on
    the (time, bytes) pairs, not on their order in the input: events equal in group and bytes end
    up ordered by time, and those equal in time too are indistinguishable. So any sort by time
    followed by a sort of each group by (bytes, time) gives the same arrays."""
    ne = ts.shape[0]
    a = 0
    while a < ne:                       # one group: [a, b)
        b = a + 1
        while b < ne and ts[b] - ts[b - 1] <= tol:
            b += 1
        if b - a > 32:                  # a large group: a stable sort by bytes (times are sorted)
            o = _argsort(bs[a:b])
            gb = bs[a:b].copy()
            gt = ts[a:b].copy()
            for k in range(b - a):
                bs[a + k] = gb[o[k]]
                ts[a + k] = gt[o[k]]
            a = b
            continue
        for i in range(a + 1, b):       # insertion sort by (bytes, time); groups are small
            x, y = bs[i], ts[i]
            j = i - 1
            while j >= a and (bs[j] > x or (bs[j] == x and ts[j] > y)):
                bs[j + 1] = bs[j]
                ts[j + 1] = ts[j]
                j -= 1
            bs[j + 1] = x
            ts[j + 1] = y
        a = b
    for i in range(1, ne):
        if ts[i] < ts[i - 1]:
            ts[i] = ts[i - 1]
    return ts, np.cumsum(bs)


# ---- a max segment tree with range add, for the default issue points ----
# Node p (root 1, leaves size_p + i) holds mx[p] = the max of its subtree counting the adds of the
# subtree's nodes (ad[p]: an add applied to all of p's subtree), but not of p's ancestors: the
# true max is mx[p] plus the ad of every proper ancestor. Adds are never pushed down.

_NONE = -(2 ** 62)   # padding leaves: below any memory


@njit(cache=True)
def _tree(values):
    size_p = 1
    while size_p < values.shape[0]:
        size_p *= 2
    mx = np.full(2 * size_p, _NONE, np.int64)
    ad = np.zeros(2 * size_p, np.int64)
    for i in range(values.shape[0]):    # a loop, not a slice assignment (compile time)
        mx[size_p + i] = values[i]
    for p in range(size_p - 1, 0, -1):
        mx[p] = max(mx[2 * p], mx[2 * p + 1])
    return mx, ad, size_p


@njit(cache=True)
def _tree_add(mx, ad, size_p, lo, hi, v):
    """Add ``v`` to the values at ``lo .. hi - 1``: to the O(log n) nodes covering the range,
    then recompute the maxima of their ancestors."""
    if lo >= hi:
        return
    a = lo + size_p
    b = hi + size_p
    while a < b:
        if a & 1:
            mx[a] += v
            ad[a] += v
            a += 1
        if b & 1:
            b -= 1
            mx[b] += v
            ad[b] += v
        a //= 2
        b //= 2
    for p in (lo + size_p, hi - 1 + size_p):
        p //= 2
        while p >= 1:
            mx[p] = max(mx[2 * p], mx[2 * p + 1]) + ad[p]
            p //= 2


@njit(cache=True)
def _last_over(mx, ad, size_p, lo, hi, size, limit, stack):
    """The largest j in [lo, hi] whose value plus ``size`` exceeds ``limit`` (compared as the
    reference does, in float64), or -1. A depth-first search from the root, right child first, that
    skips every node whose max fits or whose span misses [lo, hi]: the first leaf it reaches is
    the answer, after O(log n) nodes. (Not recursive: numba's cache cannot load recursive
    functions.) ``stack``: room for 4 * (2 * depth + 2) entries."""
    top = 0
    stack[0] = 1           # node, its span [pl, pr], the adds of its proper ancestors
    stack[1] = 0
    stack[2] = size_p - 1
    stack[3] = 0
    top = 4
    while top > 0:
        top -= 4
        p, pl, pr, above = stack[top], stack[top + 1], stack[top + 2], stack[top + 3]
        if pr < lo or hi < pl or float(mx[p] + above + size) <= limit:
            continue
        if pl == pr:
            return pl
        mid = (pl + pr) // 2
        above += ad[p]
        stack[top] = 2 * p              # left child, searched after the right one
        stack[top + 1] = pl
        stack[top + 2] = mid
        stack[top + 3] = above
        stack[top + 4] = 2 * p + 1
        stack[top + 5] = mid + 1
        stack[top + 6] = pr
        stack[top + 7] = above
        top += 8
    return -1
