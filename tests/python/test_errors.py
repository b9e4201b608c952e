"""Status codes of the core arrive as agentkv.Error subclasses carrying the C++ message, and
calls the core would abort on (a CHECK) raise instead."""

import agentkv
import pytest

HIERARCHY = [
    (agentkv.InvalidArgumentError, "INVALID_ARGUMENT", ValueError),
    (agentkv.NotFoundError, "NOT_FOUND", KeyError),
    (agentkv.AlreadyExistsError, "ALREADY_EXISTS", None),
    (agentkv.ResourceExhaustedError, "RESOURCE_EXHAUSTED", None),
    (agentkv.FailedPreconditionError, "FAILED_PRECONDITION", None),
    (agentkv.UnavailableError, "UNAVAILABLE", None),
    (agentkv.DeadlineExceededError, "DEADLINE_EXCEEDED", TimeoutError),
    (agentkv.InternalError, "INTERNAL", None),
]


@pytest.mark.parametrize("cls,code,builtin", HIERARCHY, ids=lambda v: getattr(v, "__name__", v))
def test_each_code_has_a_class_under_error(cls, code, builtin):
    assert issubclass(cls, agentkv.Error)
    assert issubclass(agentkv.Error, Exception)
    assert cls.code == code
    assert cls.__module__ == "agentkv"
    if builtin is not None:
        assert issubclass(cls, builtin)
    else:
        assert cls.__bases__ == (agentkv.Error,)
    assert str(cls("the message")) == "the message"


def cache(**options):
    return agentkv.KvCache(tokens_per_block=4, device_blocks=2, **options)


def test_invalid_option_raises_invalid_argument_with_the_field():
    with pytest.raises(agentkv.InvalidArgumentError) as e:
        cache(host_blocks=-1)
    assert str(e.value) == "host_blocks must be in [0, 1073741824], got -1"
    assert isinstance(e.value, ValueError)
    with pytest.raises(agentkv.InvalidArgumentError,
                       match=r"^block_reuse_config.finished_subagent_priority requires "
                             r"block_reuse_config.policy = per_conversation, got policy = default$"):
        cache(finished_subagent_priority=1)
    with pytest.raises(agentkv.InvalidArgumentError,
                       match=r"^eviction_order must be one of lru, gap_aware, got 'fifo'$"):
        agentkv.KvCacheOptions(eviction_order="fifo")
    # Beyond the field's C++ type: reported as the range check reports it, at once.
    with pytest.raises(agentkv.InvalidArgumentError,
                       match=r"^tokens_per_block must be in \[1, 1048576\], got 4294967296$"):
        agentkv.KvCacheOptions(tokens_per_block=2**32)
    with pytest.raises(TypeError, match="'device_block' is not a KvCacheOptions field"):
        agentkv.KvCache(device_block=4)


def test_unknown_request_and_block_raise_not_found():
    c = cache()
    with pytest.raises(agentkv.NotFoundError) as e:
        c.release(7)
    assert str(e.value) == "unknown request 7"  # not KeyError's quoted form
    assert isinstance(e.value, KeyError)
    with pytest.raises(agentkv.NotFoundError, match="^unknown request 8$"):
        c.reserve(8, 4)
    with pytest.raises(agentkv.NotFoundError, match="^block is not cached$"):
        c.get_priority(12345)
    with pytest.raises(agentkv.NotFoundError, match="^block 12345 is not cached$"):
        c.set_priority(12345, 10)


def test_duplicate_request_raises_already_exists_and_changes_nothing():
    c = cache()
    c.add_request(1, [])
    before = c.stats()
    with pytest.raises(agentkv.AlreadyExistsError, match="^request 1 is already active$"):
        c.add_request(1, [])
    assert c.stats() == before


def test_reserving_beyond_the_device_raises_resource_exhausted_and_changes_nothing():
    c = cache()
    c.add_request(1, [])
    before = c.stats()
    with pytest.raises(agentkv.ResourceExhaustedError,
                       match=r"^request 1 needs 3 more blocks; the device has 2 free and 0 "
                             r"evictable$"):
        c.reserve(1, 12)
    assert c.stats() == before
    c.check_invariants()


def test_state_conflicts_raise_failed_precondition():
    c = cache()
    c.add_request(1, [])
    keys = c.keys_from_tokens(range(4))
    with pytest.raises(agentkv.FailedPreconditionError,
                       match="^request 1 commits 1 blocks but holds 0$"):
        c.commit(1, keys)
    with pytest.raises(agentkv.FailedPreconditionError):
        c.reset()
    c.release(1)
    c.reset()


def test_bad_retention_config_is_refused_by_add_request():
    c = cache()
    overlapping = agentkv.RetentionConfig(token_ranges=[
        agentkv.TokenRangeRetention(token_start=0, token_end=8, priority=10),
        agentkv.TokenRangeRetention(token_start=4, token_end=12, priority=20)])
    with pytest.raises(agentkv.InvalidArgumentError, match="overlap"):
        c.add_request(1, [], prompt_tokens=12, retention=overlapping)
    assert c.active_requests == 0
    with pytest.raises(agentkv.InvalidArgumentError, match="^prompt_tokens must be >= 0, got -1$"):
        c.add_request(1, [], prompt_tokens=-1)
    with pytest.raises(agentkv.InvalidArgumentError,
                       match="^next_pause must be one of unknown, tool_call, subagent_wait, "
                             "human_turn, session_end, got 'coffee'$"):
        c.add_request(1, [], next_pause="coffee")
    # The names are exact: the one pause parser matches case-sensitively.
    with pytest.raises(agentkv.InvalidArgumentError, match="got 'Tool_Call'$"):
        c.add_request(1, [], next_pause="Tool_Call")
    assert c.active_requests == 0


@pytest.mark.parametrize("pause", ["unknown", "tool_call", "subagent_wait", "human_turn",
                                   "session_end"])
def test_every_pause_name_of_the_one_vocabulary_is_accepted(pause):
    c = cache(eviction_order="gap_aware")
    c.add_request(1, [], conversation=1, next_pause=pause)
    assert c.active_requests == 1


def test_arguments_the_core_would_abort_on_raise_invalid_argument():
    """Each of these reaches a CHECK in the core unless the binding refuses it first."""
    c = agentkv.KvCache(tokens_per_block=4, device_blocks=4, host_blocks=4,
                        block_reuse_policy="per_conversation")
    keys = c.keys_from_tokens(range(8))
    c.add_request(1, keys, prompt_tokens=8, conversation=1)
    c.reserve(1, 8)
    c.commit(1, keys)
    c.release(1)
    handle = c.plan_committed_retention(1)
    assert handle.keys == keys[::-1]

    c.set_clock(100)
    cases = [
        (lambda: c.set_clock(99), "^set_clock: now_ns 99 is before the clock 100$"),
        (lambda: c.advance_steps(-1), r"^n must be in \[0, 2\*\*62 - current_step\], got -1$"),
        (lambda: c.prefetch_chain(keys, -1), r"^max_blocks must be in \[0, 2\*\*63\), got -1$"),
        (lambda: c.apply_committed_retention(handle, 101),
         r"^priority must be in \[0, 100\], got 101$"),
        (lambda: c.set_priority(keys[0], -1), r"^priority must be in \[0, 100\], got -1$"),
        (lambda: c.set_priority(keys[0], 10, duration=2**63 - 1),
         "^duration must be at most 4611686018427387904 steps"),
        (lambda: agentkv.BlockKeyHasher(0).keys_from_tokens([1, 2], 0),
         r"^tokens_per_block must be in \[1, 1048576\], got 0$"),
    ]
    for call, message in cases:
        with pytest.raises(agentkv.InvalidArgumentError, match=message):
            call()
    c.add_request(2, [])
    with pytest.raises(agentkv.InvalidArgumentError, match="^total_tokens must be at most"):
        c.reserve(2, 2**63 - 1)
    c.release(2)
    assert c.clock_ns == 100 and c.current_step == 0
    assert c.get_priority(keys[0]) == 35
    c.check_invariants()


def test_ids_beyond_int64_are_type_errors():
    c = cache()
    with pytest.raises(TypeError):
        c.release(2**63)
    with pytest.raises(TypeError):
        c.match([2**64])
