"""agentkv.sglang._tokens.Tokens: a request's prompt and output hashed as one sequence without
joining them must give exactly the keys of the joined list, wherever the two meet."""

import random

import pytest

import agentkv
from agentkv.sglang._tokens import Tokens


@pytest.mark.parametrize("page", [1, 4, 16])
def test_keys_of_two_lists_equal_the_keys_of_their_join(page):
    cache = agentkv.KvCache(tokens_per_block=page, device_blocks=8)
    rng = random.Random(page)
    for _ in range(300):
        head = [rng.randrange(50_000) for _ in range(rng.randrange(0, 80))]
        tail = [rng.randrange(50_000) for _ in range(rng.randrange(0, 80))]
        joined = head + tail
        end = rng.randrange(0, len(joined) + 1) // page * page
        start = rng.randrange(0, end + 1) // page * page
        namespace = rng.choice([0, 7])
        whole = cache.keys_from_tokens(joined, namespace, end=end)
        tokens = Tokens(head, tail)
        assert len(tokens) == len(joined) and tokens.joined() == joined
        assert tokens.keys(cache, 0, end, namespace=namespace) == whole
        if start:  # continuing a chain from the key of the page before `start`
            parent = whole[start // page - 1]
            assert tokens.keys(cache, start, end, parent=parent) == whole[start // page:]


def test_tokens_copy_what_is_not_a_list():
    tokens = Tokens((1, 2, 3), range(4, 6))
    assert tokens.head == [1, 2, 3] and tokens.tail == [4, 5] and tokens.joined() == [1, 2, 3, 4, 5]
