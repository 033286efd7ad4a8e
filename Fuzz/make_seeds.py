#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz target (Fuzz/corpus/*.bin).

Each seed is a small program in the layout fuzz_sdk.c decodes: per step one opcode byte, then a
record of fixed size (96 bytes for a start, 16 for the others). Every seed exercises one part of
the API on purpose, so the fuzzer starts from inputs that reach deep code (loop threads, pull
streams, blocking calls, waiting cancels, hostile sequence numbers) instead of discovering the
layout byte by byte. Run it again after changing the layout: python3 Fuzz/make_seeds.py
"""
import os
import struct

RECORD = 16
START_RECORD = 96


def u32(value):
    return struct.pack(">I", value & 0xFFFFFFFF)


def u64(value):
    return struct.pack(">Q", value & 0xFFFFFFFFFFFFFFFF)


def record(opcode, payload, size=RECORD):
    assert len(payload) <= size, (opcode, len(payload))
    return bytes([opcode]) + payload + bytes(size - len(payload))


def create(client, workers2=False, loop=False, affinity=0, bad_workers=False, seed=7):
    shape = (1 if workers2 else 0) | (2 if loop else 0) | ((affinity & 3) << 2)
    if bad_workers:
        shape |= 0x30
    return record(0, bytes([client, shape]) + u32(seed))


# Delivery values as the decoder maps them without raw knobs (value % 5).
SYNC, WORKER, FRESH, MIXED, LOOP = 0, 1, 2, 3, 4
CB_SYNC, CB_ASYNC, SILENT, IGNORED, WAITS = 0, 1, 2, 3, 4


def behavior(knobs=0, delivery=WORKER, delay=0, jitter=0, count=1, outcomes=(0,) * 8, cancel=CB_ASYNC,
             late=0, chunk_units=0, progress=1, interval=0, concurrency=1, end=0, duplicate=0, after=0,
             pause=0, error=1, seed=11, bits=64, first=0, jump_at=0, jump=0, corrupt_at=0, corrupt=0):
    """77 bytes, in fill_behavior's order. chunk_units: chunk = 1 + units * 16 (without raw knobs)."""
    out = u32(knobs) + bytes([delivery]) + u32(delay) + u32(jitter) + bytes([count])
    out += bytes(list(outcomes)[:8])
    out += bytes([cancel & 0xFF, late]) + u32(chunk_units) + bytes([progress]) + u32(interval)
    # concurrency without raw knob: 1 + value % 4
    out += bytes([(concurrency - 1) & 0xFF if not (knobs & (1 << 8)) else concurrency])
    out += bytes([end, duplicate, after, pause]) + u32(error) + u64(seed)
    out += bytes([bits & 0xFF]) + u64(first) + bytes([jump_at]) + u64(jump) + bytes([corrupt_at]) + u64(corrupt)
    assert len(out) == 77, len(out)
    return out


REQUEST, DOWNLOAD, PULL = 0, 1, 2
ACT_NONE, ACT_CANCEL, ACT_PAUSE, ACT_RESUME, ACT_POST, ACT_BLOCK, ACT_DESTROY_OWN, ACT_TOKEN = range(8)


def start(client, kind, b, action=ACT_NONE, every=1, refuse=0, response=16, chunks=8, extra=3,
          total_kind=2, null_callback=False, null_behavior=False, drop_handle=False):
    shape = kind
    if null_callback:
        shape |= 0xF0
    if null_behavior:
        shape |= 0x0C
    elif drop_handle:
        shape |= 0x08
    payload = bytes([client, shape]) + b + bytes([action, (every - 1) & 0xFF, refuse])
    payload += bytes([1]) + u32(response // 4)  # response_kind 1: size = (raw & 0xFF) * 4
    payload += bytes([total_kind, chunks, extra])
    return record(1, payload, START_RECORD)


def handle_call(which, index=0, how=3, value=0):
    """which: 0 cancel, 1 pause, 2 resume, 3 release. how % 6: 0 zero, 1 forged, 2 stale, else op `index`."""
    return record(4, bytes([how]) + u64(value) + bytes([index, which]))


def destroy(client):
    return record(5, bytes([client]))


def post(client, null_job=False):
    return record(6, bytes([client, 0 if null_job else 1]))


def blocking(client, key, how=2, raw=50):
    """how % 4: 0 interrupt, 1 raw duration (often out of range), else (raw & 0xFF) * 4 us."""
    return record(7, bytes([client, key, how]) + u32(raw))


def token(client, how=1):
    return record(8, bytes([client, how]))


def helper(client, what, key=0, how=3, index=0):
    """what % 6: 0 long blocking call, 1 token setter, 2 cancel/pause/resume a handle, 3 post, 4 interrupt,
    5 send, cancel and disconnect on connection slot `key`."""
    return record(9, bytes([client, what, key, how]) + u64(0) + bytes([index]))


def u16(value):
    return struct.pack(">H", value & 0xFFFF)


# id_bits as the decoder maps them (index into its table): 8, 12, 16, 32, 64, then invalid 0, 7, 9 (valid), 63, 65.
BITS_8, BITS_12, BITS_16, BITS_32, BITS_64, BITS_0, BITS_7 = range(7)
BITS_65 = 9
# disconnect_report as the decoder maps them (byte % 5 - 1).
REPORT_UNKNOWN_LOW, REPORT_SYNC, REPORT_ASYNC, REPORT_SILENT, REPORT_UNKNOWN = range(5)
# What a connection's reply callback does (FZ_RACT_*).
RACT_NONE, RACT_CANCEL_SELF, RACT_CANCEL_RECENT, RACT_DISCONNECT, RACT_SEND, RACT_DESTROY_RPC, RACT_COUNTERS, \
    RACT_DESTROY_CLIENT = range(8)
# Callback sets: 0 none, 1 a set without callbacks, 2 without on_reply, 3 full.
SET_NONE, SET_EMPTY, SET_NO_REPLY, SET_FULL = range(4)


def rpc_create(client, slot, bits=BITS_32, report=REPORT_SYNC, unknown=0, disconnect=0, callbacks=SET_FULL,
               action=RACT_NONE, every=1, null_out=False):
    """unknown: per mille (values above 1000 are refused); disconnect: below 40, or a multiple of 8 below 1100."""
    payload = bytes([client, slot, bits, report]) + u16(unknown) + u16(disconnect)
    payload += bytes([callbacks, action, (every - 1) & 0xFF, 1 if null_out else 0])
    return record(10, payload)


ID_ASSIGNED, ID_CHOSEN, ID_EDGE, ID_ASSIGNED_NO_OUT = range(4)


def rpc_send(slot, b, id_shape=ID_ASSIGNED, id_raw=0, response=4, null_behavior=False, null_request=False):
    """id_shape: assigned, chosen (1 + raw % 16), an edge value around the id mask (raw & 7 picks it),
    assigned without out_id. response: raw; raw % 8 != 0 gives (raw & 0xFF) * 4 bytes."""
    shape = id_shape | (0x10 if null_behavior else 0) | (0x20 if null_request else 0)
    return record(11, bytes([slot, shape]) + u64(id_raw) + b + u32(response), START_RECORD)


CALL_CANCEL, CALL_DISCONNECT, CALL_DESTROY, CALL_SET, CALL_NULL = range(5)


def rpc_call(slot, which, id_raw=1, callbacks=SET_FULL, action=RACT_NONE, every=1):
    """cancel: an odd id_raw picks a recent id, an even one id_raw % 32."""
    return record(12, bytes([slot, which]) + u64(id_raw) + bytes([callbacks, action, (every - 1) & 0xFF]))


def listen(client, topic, b, count=5, shape=0, action=ACT_NONE, every=1):
    """count: endless when count % 4 == 0 (unless events may come inside start); shape 2: NULL request,
    0xF0: NULL callback, 0x0C: NULL behaviour."""
    return record(13, bytes([client, topic]) + u64(count) + bytes([shape]) + b + bytes([action, (every - 1) & 0xFF]),
                  START_RECORD)


SEEDS = {
    "basic": [
        create(0),
        start(0, REQUEST, behavior(count=3)),
        start(0, DOWNLOAD, behavior(chunk_units=4)),
        start(0, PULL, behavior(chunk_units=4), refuse=2),
        handle_call(0, index=1),
        handle_call(2, index=2),
        handle_call(3, index=0),
        destroy(0),
    ],
    "loop_thread": [
        create(0, loop=True, affinity=2),
        post(0), post(0), post(0, null_job=True),
        start(0, DOWNLOAD, behavior(delivery=LOOP, concurrency=3), action=ACT_POST, every=2),
        start(0, REQUEST, behavior(delivery=LOOP, count=2, cancel=CB_SYNC), action=ACT_CANCEL),
        helper(0, 2, index=0),
        handle_call(0, index=1),
        destroy(0),
        post(0),
    ],
    "affinity_and_helpers": [
        create(0, affinity=1),
        helper(0, 1),
        helper(0, 0, key=5),
        token(0, how=1),
        blocking(0, 5, how=0),
        start(0, REQUEST, behavior(), action=ACT_TOKEN),
        helper(0, 4, key=5),
        destroy(0),
    ],
    "blocking": [
        create(1, workers2=True),
        blocking(1, 9, how=2, raw=100),
        helper(1, 0, key=3),
        helper(1, 0, key=3),
        blocking(1, 3, how=0),
        blocking(1, 4, how=1, raw=0xFFFFFFFF),
        start(1, REQUEST, behavior(count=2), action=ACT_BLOCK),
        destroy(1),
        blocking(1, 3, how=0),
    ],
    "cancel_waits": [
        create(0, workers2=True),
        start(0, DOWNLOAD, behavior(cancel=WAITS, concurrency=4, chunk_units=1), total_kind=1),
        start(0, REQUEST, behavior(cancel=WAITS, count=0)),
        helper(0, 2, index=0),
        handle_call(0, index=0),
        handle_call(0, index=1),
        handle_call(3, index=0),
        destroy(0),
    ],
    "sequences": [
        create(2),
        start(2, DOWNLOAD, behavior(knobs=1 << 14, bits=32, first=(1 << 32) - 3, jump_at=4, jump=1000,
                                    corrupt_at=2, corrupt=0xFFFFFFFFFFFFFFFF, delivery=SYNC)),
        start(2, PULL, behavior(knobs=1 << 15, bits=16, first=1, delivery=SYNC), refuse=3),
        handle_call(2, index=1),
        start(2, DOWNLOAD, behavior(knobs=1 << 14, bits=7)),
        destroy(2),
    ],
    "bad_input": [
        create(0, bad_workers=True),
        create(0, loop=False, affinity=2),
        create(0, affinity=3),
        create(0),
        start(0, REQUEST, behavior(knobs=0xFFFF, delay=20_000_000, chunk_units=0, error=0)),
        start(0, DOWNLOAD, behavior(), null_callback=True),
        start(0, DOWNLOAD, behavior(delivery=LOOP)),
        start(0, REQUEST, behavior(), response=4096, null_behavior=True),
        handle_call(0, how=1, value=0x1234),
        handle_call(3, how=0),
        handle_call(1, index=3),
        post(0),
        token(0, how=3),
        destroy(0),
        destroy(0),
        start(0, REQUEST, behavior()),
    ],
    "pull_sync": [
        create(0),
        start(0, PULL, behavior(delivery=SYNC, concurrency=2, end=2, cancel=SILENT), refuse=2, chunks=5),
        handle_call(2, index=0),
        handle_call(2, index=0),
        start(0, PULL, behavior(delivery=SYNC), refuse=255),
        handle_call(0, index=0),
        destroy(0),
    ],
    "three_clients": [
        create(0), create(1, loop=True), create(2, affinity=1),
        start(0, REQUEST, behavior(delivery=MIXED, count=4, late=1, cancel=CB_SYNC)),
        start(1, DOWNLOAD, behavior(delivery=FRESH, pause=1, interval=0, duplicate=1, after=2)),
        start(2, DOWNLOAD, behavior(delivery=WORKER, concurrency=4, end=1), action=ACT_DESTROY_OWN),
        handle_call(1, index=1),
        destroy(1),
        handle_call(0, index=1),
        handle_call(3, index=1),
        handle_call(3, how=2, index=0),
        helper(1, 3),
        post(1),
        handle_call(0, index=0),
        destroy(0),
        destroy(2),
    ],
    "rpc_basic": [
        create(0),
        rpc_create(0, 0),
        rpc_send(0, behavior()),
        rpc_send(0, behavior(delay=1 << 8)),
        rpc_send(0, behavior(), id_shape=ID_CHOSEN, id_raw=4),
        rpc_send(0, behavior(delivery=SYNC, count=3)),
        rpc_send(0, behavior(count=0), id_shape=ID_CHOSEN, id_raw=6),
        rpc_call(0, CALL_CANCEL, id_raw=7),
        rpc_call(0, CALL_DISCONNECT),
        rpc_call(0, CALL_SET),
        rpc_send(0, behavior(count=2)),
        rpc_call(0, CALL_DESTROY),
        rpc_call(0, CALL_DESTROY),
        rpc_send(0, behavior()),
        destroy(0),
    ],
    "rpc_hostile": [
        create(0, workers2=True),
        rpc_create(0, 1, bits=BITS_8, report=REPORT_ASYNC, unknown=500, disconnect=200, action=RACT_SEND),
        rpc_send(1, behavior(count=0, late=1, cancel=CB_SYNC), id_shape=ID_CHOSEN, id_raw=1),
        rpc_send(1, behavior(count=0, late=1, cancel=SILENT), id_shape=ID_CHOSEN, id_raw=2),
        rpc_send(1, behavior(count=4, delivery=MIXED, jitter=0x3000, cancel=IGNORED)),
        helper(0, 5, key=1),
        rpc_call(1, CALL_CANCEL, id_raw=2),
        rpc_call(1, CALL_CANCEL, id_raw=3),
        rpc_create(0, 2, report=REPORT_SILENT, action=RACT_DESTROY_RPC, every=2),
        rpc_send(2, behavior(delivery=SYNC, count=3)),
        rpc_send(2, behavior(delivery=FRESH, count=2)),
        rpc_create(0, 3, report=REPORT_SYNC, action=RACT_DISCONNECT, callbacks=SET_NO_REPLY),
        rpc_send(3, behavior(count=0)),
        rpc_call(3, CALL_SET, callbacks=SET_FULL, action=RACT_DESTROY_CLIENT),
        rpc_send(3, behavior(delivery=SYNC)),
        destroy(0),
        rpc_send(1, behavior()),
    ],
    "rpc_bad_input": [
        create(0),
        rpc_create(0, 0, bits=BITS_0),
        rpc_create(0, 0, bits=BITS_65),
        rpc_create(0, 0, report=REPORT_UNKNOWN),
        rpc_create(0, 0, unknown=1050),
        rpc_create(0, 0, null_out=True),
        rpc_call(0, CALL_NULL),
        rpc_create(0, 0, bits=BITS_16),
        rpc_send(0, behavior(cancel=WAITS)),
        rpc_send(0, behavior(), id_shape=ID_ASSIGNED_NO_OUT),
        rpc_send(0, behavior(), id_shape=ID_EDGE, id_raw=2),
        rpc_send(0, behavior(), id_shape=ID_EDGE, id_raw=4),
        rpc_send(0, behavior(knobs=0xFFFF, delay=20_000_000, error=0)),
        rpc_send(0, behavior(), response=0x7FFFFFF8),
        rpc_send(0, behavior(count=0), id_shape=ID_CHOSEN, id_raw=1),
        rpc_send(0, behavior(), id_shape=ID_CHOSEN, id_raw=1),
        rpc_send(0, behavior(), null_behavior=True, null_request=True),
        destroy(0),
        rpc_call(0, CALL_CANCEL),
        rpc_call(0, CALL_SET),
    ],
    "listeners": [
        create(0),
        listen(0, 0, behavior(chunk_units=2), count=5),
        listen(0, 0, behavior(), count=5),
        listen(0, 1, behavior(interval=0x800, chunk_units=1), count=4),
        handle_call(1, index=2),
        handle_call(2, index=2),
        handle_call(0, index=2),
        listen(0, 1, behavior(), count=3),
        listen(0, 2, behavior(delivery=SYNC, concurrency=4, pause=0), count=8, action=ACT_PAUSE, every=1),
        handle_call(2, index=4),
        listen(0, 2, behavior(concurrency=4, interval=0x800), count=41, action=ACT_PAUSE, every=3),
        handle_call(2, index=5),
        listen(0, 3, behavior(cancel=IGNORED, interval=0x800), count=4),
        handle_call(0, index=6),
        listen(0, 3, behavior(), count=1),
        listen(0, 1, behavior(), shape=0xF0),
        destroy(0),
    ],
}


def main():
    directory = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(directory, exist_ok=True)
    for name, steps in SEEDS.items():
        with open(os.path.join(directory, f"seed-{name}.bin"), "wb") as f:
            f.write(b"".join(steps))
    print(f"wrote {len(SEEDS)} seeds to {directory}")


if __name__ == "__main__":
    main()
