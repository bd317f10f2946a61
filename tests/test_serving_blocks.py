"""The block allocator (paged attention's memory manager) and the contiguous baseline: worked examples
by hand, and property-based tests (hypothesis) that no block is ever leaked or double-owned."""
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.engine.kv import BlockAllocator, OutOfBlocks
from helpers.serving import tables
from helpers.serving import paging
from helpers.serving.paging import ContiguousPool, contiguous
from helpers.serving.traces import TraceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from serving_bench import FitCounts, fit_counts  # noqa: E402  (make bench's paged figure)


def check(a: BlockAllocator) -> None:
    """Invariants: every block is free xor referenced, reference counts equal the tables holding the block
    plus its retains, each table is just long enough."""
    held: dict[int, int] = dict(a.held)
    for seq, table in a.tables.items():
        assert len(table) == a.blocks_for(a.lengths[seq]), f"table of {seq!r} has the wrong length"
        assert len(set(table)) == len(table), f"table of {seq!r} holds a block twice"
        for b in table:
            held[b] = held.get(b, 0) + 1
    free = set(a.free_list)
    assert len(free) == len(a.free_list), "a block is on the free list twice"
    for b in range(a.num_blocks):
        assert a.refcount[b] == held.get(b, 0), f"block {b}: refcount {a.refcount[b]} != {held.get(b, 0)}"
        assert (b in free) == (a.refcount[b] == 0), f"block {b} is leaked or double-owned"


def sim_requests(prompt_lens, output_lens):
    """Requests of these prompt and output lengths (token 0 throughout: the simulation counts, never reads)."""
    return [TraceRequest(i, (0,) * p, n) for i, (p, n) in enumerate(zip(prompt_lens, output_lens))]


def test_a_sequence_takes_a_new_block_only_when_its_last_is_full():
    a = BlockAllocator(num_blocks=8, block_size=4)
    assert a.allocate("s", 5) == [0, 1]          # 5 tokens: blocks of 4 + 1
    a.append("s", 3)                             # 8 tokens: still two blocks
    assert a.tables["s"] == [0, 1] and a.free_blocks == 6
    a.append("s")                                # the 9th token opens a third block
    assert a.tables["s"] == [0, 1, 2] and a.stored_tokens() == 9
    a.free("s")
    assert a.free_blocks == 8 and a.refcount == [0] * 8
    check(a)


def test_a_shared_prefix_copies_the_partly_filled_block_on_write():
    a = BlockAllocator(num_blocks=8, block_size=4)
    a.allocate("parent", 6)                      # blocks 0 (full) and 1 (2 of 4 slots)
    a.allocate("child", 6, shared=a.tables["parent"])   # a prefix hit: the child shares both blocks
    assert a.tables["child"] == [0, 1] and a.refcount[:2] == [2, 2] and a.used_blocks == 2
    a.append("child")                            # writes into shared block 1: copy-on-write
    assert a.copies == 1 and a.tables["child"][0] == 0 and a.tables["child"][1] not in (0, 1)
    assert a.refcount[0] == 2 and a.refcount[1] == 1
    a.append("parent")                           # block 1 is the parent's alone now: no copy
    assert a.copies == 1 and a.tables["parent"] == [0, 1]
    a.free("parent")
    assert a.refcount[0] == 1 and a.refcount[1] == 0
    check(a)


def test_sharing_a_full_last_block_needs_no_copy():
    a = BlockAllocator(num_blocks=4, block_size=4)
    a.allocate("p", 4)
    a.allocate("c", 4, shared=a.tables["p"])
    a.append("c")
    assert a.copies == 0 and a.tables["c"][0] == 0 and len(a.tables["c"]) == 2


def test_out_of_blocks_changes_nothing():
    a = BlockAllocator(num_blocks=2, block_size=4)
    a.allocate("s", 8)
    with pytest.raises(OutOfBlocks):
        a.append("s")
    assert a.lengths["s"] == 8 and a.free_blocks == 0
    with pytest.raises(OutOfBlocks):
        a.allocate("t", 1)
    assert "t" not in a.tables
    check(a)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "append", "share", "free"]), st.integers(0, 5),
                          st.integers(0, 5), st.integers(1, 9)), max_size=60),
       st.integers(1, 24), st.integers(1, 6))
def test_no_block_is_ever_leaked_or_double_owned(ops, num_blocks, block_size):
    a = BlockAllocator(num_blocks, block_size)
    for op, x, y, n in ops:
        try:
            if op == "alloc" and x not in a.tables:
                a.allocate(x, n)
            elif op == "append" and x in a.tables:
                a.append(x, n)
            elif op == "share" and x in a.tables and y not in a.tables:
                a.allocate(y, a.lengths[x], shared=a.tables[x])
            elif op == "free" and x in a.tables:
                a.free(x)
        except OutOfBlocks:
            pass
        check(a)
        # what the tables hold equals what left the free list
        assert a.used_blocks == len({b for t in a.tables.values() for b in t})
        assert a.stored_tokens() <= a.used_blocks * block_size
    for s in list(a.tables):
        a.free(s)
    assert a.free_blocks == num_blocks
    check(a)


def test_contiguous_pool_strands_free_slots_in_small_holes():
    p = ContiguousPool(10)
    p.reserve("a", 3)
    p.reserve("b", 3)
    p.reserve("c", 3)          # 1 slot left at the end
    p.free("b")                # a hole of 3 in the middle
    assert p.reserved == 6
    assert p.stranded(4) == 4  # 3 + 1 free slots, none usable for 4
    assert p.stranded(3) == 1
    assert not p.reserve("d", 4) and "d" not in p.runs
    assert p.reserve("d", 3) and p.runs["d"] == (3, 3)


def test_fit_counts_by_hand():
    # 3 requests of prompt 10 and output 6, max 54: contiguous reserves 64 each, paged 16 tokens = 1 block of 16
    reqs = sim_requests([10, 10, 10], [6, 6, 6])
    assert fit_counts(reqs, 128, 54, block_size=16) == FitCounts(contiguous=2, paged=3, ratio=1.5)


def test_simulation_paged_runs_more_at_once_and_wastes_less():
    import random

    rng = random.Random(0)
    reqs = sim_requests([rng.randint(8, 64) for _ in range(40)], [rng.randint(4, 96) for _ in range(40)])
    cont = contiguous(reqs, 1024, 128)
    paged = paging.paged(reqs, 1024, block_size=16)
    assert paged.mean_running > cont.mean_running
    assert paged.steps < cont.steps
    assert all(r["internal waste"] < 16 * r["running"] for r in paged.rows)   # < one block per sequence
    assert all(r["reserved"] <= 1024 for r in cont.rows + paged.rows)
    # every request ran to completion: total decode writes = total output tokens
    assert sum(r["running"] for r in paged.rows) == sum(r.max_new_tokens for r in reqs)
    assert sum(r["running"] for r in cont.rows) == sum(r.max_new_tokens for r in reqs)
    c, p = tables.simulation_frame([cont, paged]).to_dict("records")
    assert p["holding ÷ reserved"] > c["holding ÷ reserved"]
    assert math.isclose(c["mean internal waste (slots)"], c["mean slots reserved"] - c["mean slots holding tokens"])


def test_bench_paged_fit_on_the_chat_trace(tiny):
    """The bench's paged_over_contiguous_sequences: the seeded chat trace's real token counts against a
    contiguous reservation of prompt + max_output, recomputed here from the same requests by hand."""
    from helpers.serving import measured

    w = measured.workload("tiny")
    reqs = measured.chat_requests(tiny.tokenizer, measured.Workload(requests=64))
    slots = 6 * (w.max_output + max(len(r.prompt) for r in reqs))      # notebook 07's memory: six of the longest
    assert measured.paged_trace(tiny.tokenizer, w)[1] == slots
    fit = fit_counts(*measured.paged_trace(tiny.tokenizer, w), w.max_output)
    room, contiguous = slots, 0
    for r in reqs:
        if len(r.prompt) + w.max_output > room:
            break
        room -= len(r.prompt) + w.max_output
        contiguous += 1
    room, paged = slots // 16, 0
    for r in reqs:
        need = math.ceil((len(r.prompt) + r.max_new_tokens) / 16)
        if need > room:
            break
        room -= need
        paged += 1
    assert fit == FitCounts(contiguous, paged, paged / contiguous)
    assert fit.ratio > 1
    assert measured.workload("mistral-7b").slots > w.slots


def test_bench_has_a_serving_section():
    import bench as bench_script

    assert "serving" in bench_script.SECTIONS
