"""Block keys from token lists, int32 buffers, bytes and block-id lists."""

import array
import sys

import agentkv
import pytest

TPB = 4


def hasher():
    return agentkv.BlockKeyHasher(1234)


def test_list_array_memoryview_and_bytes_give_the_same_keys():
    tokens = list(range(100, 118))  # 4 full blocks and a partial one
    keys = hasher().keys_from_tokens(tokens, TPB)
    assert len(keys) == 4
    assert all(isinstance(k, int) and 0 <= k < 2**64 for k in keys)
    as_array = array.array("i", tokens)
    assert hasher().keys_from_tokens(as_array, TPB) == keys
    assert hasher().keys_from_tokens(memoryview(as_array), TPB) == keys
    assert hasher().keys_from_tokens(tuple(tokens), TPB) == keys
    if sys.byteorder == "little":
        raw = b"".join(t.to_bytes(4, "little", signed=True) for t in tokens)
    else:
        raw = b"".join(t.to_bytes(4, "big", signed=True) for t in tokens)
    assert hasher().keys_from_tokens(raw, TPB) == keys
    assert hasher().keys_from_tokens(bytearray(raw), TPB) == keys


def test_keys_chain_block_by_block():
    tokens = list(range(12))
    keys = hasher().keys_from_tokens(tokens, TPB)
    parent = hasher().root_key()
    for i, key in enumerate(keys):
        assert agentkv.BlockKeyHasher.token_block_key(parent, tokens[i * TPB:(i + 1) * TPB]) == key
        parent = key
    # A shared prefix gives shared keys; the first differing block and all after it differ.
    other = hasher().keys_from_tokens(tokens[:4] + [999] + tokens[5:], TPB)
    assert other[0] == keys[0] and other[1] != keys[1] and other[2] != keys[2]


def test_seed_and_extra_key_separate_chains():
    tokens = list(range(8))
    keys = hasher().keys_from_tokens(tokens, TPB)
    assert agentkv.BlockKeyHasher(1234).keys_from_tokens(tokens, TPB) == keys
    assert agentkv.BlockKeyHasher(99).keys_from_tokens(tokens, TPB)[0] != keys[0]
    salted = hasher().keys_from_tokens(tokens, TPB, extra_key=7)
    assert salted[0] != keys[0]
    assert hasher().root_key(7) != hasher().root_key(0)


def test_a_cache_hashes_with_its_seed_and_block_size():
    c = agentkv.KvCache(tokens_per_block=TPB, device_blocks=4, hash_seed=1234)
    tokens = list(range(10))
    assert c.keys_from_tokens(tokens) == hasher().keys_from_tokens(tokens, TPB)
    assert c.hasher.keys_from_tokens(tokens, TPB) == hasher().keys_from_tokens(tokens, TPB)
    assert c.keys_from_block_ids([5, 6]) == hasher().keys_from_block_ids([5, 6])


def test_long_inputs_hash_like_short_ones():
    # Long inputs are hashed with the GIL released; the keys are those of the chained blocks.
    tokens = array.array("i", range(50_010))  # 3125 full blocks of 16 and 10 tokens
    keys = hasher().keys_from_tokens(tokens, 16)
    assert len(keys) == 3125
    head = hasher().keys_from_tokens(tokens[:160], 16)
    assert keys[:10] == head
    last = tokens[3124 * 16:3125 * 16]
    assert keys[-1] == agentkv.BlockKeyHasher.token_block_key(keys[-2], last)


def test_block_ids_from_a_list_or_a_uint64_array():
    ids = [3, 2**64 - 1, 0, 17]
    keys = hasher().keys_from_block_ids(ids)
    assert len(keys) == 4
    assert hasher().keys_from_block_ids(array.array("Q", ids)) == keys
    parent = hasher().root_key()
    for block_id, key in zip(ids, keys):
        assert agentkv.BlockKeyHasher.id_block_key(parent, block_id) == key
        parent = key
    assert hasher().keys_from_block_ids(ids, extra_key=1)[0] != keys[0]


def test_wrong_element_types_are_refused():
    with pytest.raises(TypeError, match="tokens must be int32: got a buffer of format 'q'"):
        hasher().keys_from_tokens(array.array("q", [1, 2, 3, 4]), TPB)
    with pytest.raises(TypeError, match="tokens must be a sequence of int32"):
        hasher().keys_from_tokens(["a", "b"], TPB)
    with pytest.raises(TypeError, match="tokens must be a sequence of int32"):
        hasher().keys_from_tokens([2**31], TPB)
    with pytest.raises(agentkv.InvalidArgumentError,
                       match="^a bytes-like tokens buffer must hold whole int32 values, got 6 bytes$"):
        hasher().keys_from_tokens(b"\0" * 6, TPB)
    with pytest.raises(TypeError, match="block_ids must be uint64: got a buffer of format 'i'"):
        hasher().keys_from_block_ids(array.array("i", [1]))
    with pytest.raises(TypeError, match="block_ids must be a sequence of ints"):
        hasher().keys_from_block_ids([-1])
