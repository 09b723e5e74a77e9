#!/usr/bin/python3
"""Writes the seed corpora in corpus/<target>/ (small, valid and near-valid
inputs in tether's wire format, docs/wire-protocol.md). Rerun after a format
change: /usr/bin/python3 test/fuzz/make_seeds.py"""
import hashlib
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION = 0x52485454, 4
KIND = dict(challenge=1, hello=2, welcome=3, reject=4, register=5, table=6, p2p=7, collective=8, abort=9,
            goodbye=10, heartbeat=11)


def header(kind, length, comm=0, coll=0, step=0, tag=0, flags=0, magic=MAGIC, version=VERSION, root=0xffffffff):
    return struct.pack('<IHBBQQIIQII', magic, version, kind, flags, comm, coll, step, tag, length, root, 0)


def address(family=4, port=5000, host_id=7):
    addr = bytes([127, 0, 0, 1] + [0] * 12) if family == 4 else bytes(15) + b'\x01'
    return struct.pack('<B16sHQ', family, addr, port, host_id)


def string(s):
    b = s.encode()
    return struct.pack('<H', len(b)) + b


challenge = struct.pack('<I', 0) + bytes(range(16))
hello = struct.pack('<IIQ', 3, 4, 0x1122334455667788) + bytes(range(16, 32)) + bytes(range(32))
welcome = bytes(range(32))
reject = struct.pack('<H', 1) + string('proof of the secret does not verify')
reject_retry = struct.pack('<H', 9) + string("rank 1's previous connection to rank 0 did not close within 10000 ms")
register = struct.pack('<I', 2) + address()
table = struct.pack('<I', 4) + b''.join(address(port=5000 + i) for i in range(3)) + address(family=6, port=6000)


def unique_id(family=4, port=29500):
    b = bytearray(128)
    struct.pack_into('<IHB', b, 0, 0x44495554, VERSION, family)
    b[8:24] = bytes([127, 0, 0, 1] + [0] * 12) if family == 4 else bytes(15) + b'\x01'
    struct.pack_into('<H', b, 24, port)
    b[32:48] = bytes(range(100, 116))
    b[120:128] = hashlib.sha256(bytes(b[:120])).digest()[:8]
    return bytes(b)


def qp_record(src=5, dst=3, qpn=0x1c2, psn=0x51f00, lid=0, link_layer=2, mtu=3, gid_last=1, flags=0):
    gid = bytes(15) + bytes([gid_last])
    return struct.pack('<IHHIIIIHBBBBBB16sB15s', 0x52505154, 1, 64, src, dst, qpn, psn, lid, 1, link_layer, mtu, 0,
                       1, 1, gid, flags, bytes(15))


def mr_record(rank=5, rkey=0x1234, addr=0x7f0000001000, length=1 << 20):
    return struct.pack('<IHHIIQQ', 0x52524D54, 1, 32, rank, rkey, addr, length)


corpora = {
    'frame_header': {
        'hello': header(KIND['hello'], len(hello)),
        'p2p': header(KIND['p2p'], 64, comm=9, coll=3, tag=7),
        'collective': header(KIND['collective'], 4096, comm=9, coll=12, step=2, tag=1),
        'heartbeat': header(KIND['heartbeat'], 0),
        'too_long_control': header(KIND['hello'], 1 << 20),
        'wrong_magic': header(KIND['hello'], 0, magic=0xdeadbeef),
        'wrong_version': header(KIND['hello'], 0, version=3),
        'unknown_kind': header(200, 0),
    },
    'handshake': {
        'challenge': b'\x00' + challenge,
        'hello': b'\x01' + hello,
        'welcome': b'\x02' + welcome,
        'reject': b'\x03' + reject,
        'reject_retry': b'\x03' + reject_retry,
        'register': b'\x04' + register,
        'table': b'\x05' + table,
        'stream': b'\x06' + header(KIND['challenge'], len(challenge)) + challenge + header(KIND['hello'], len(hello))
                  + hello + header(KIND['welcome'], len(welcome)) + welcome,
        'short_hello': b'\x01' + hello[:20],
    },
    'rdma_records': {
        'qp_roce': b'\x00' + qp_record(),
        'qp_ib': b'\x00' + qp_record(lid=9, link_layer=1, gid_last=0),
        'qp_roce_grh': b'\x01' + qp_record(),
        'qp_zeroed': b'\x00' + bytes(64),
        'qp_swapped_ranks': b'\x00' + qp_record(src=3, dst=5),
        'qp_placeholder': b'\x00' + qp_record(qpn=0, flags=1),
        'mr': b'\x00' + mr_record(),
        'mr_short': b'\x00' + mr_record(length=16),
    },
    'unique_id': {
        'v4': unique_id().hex().encode(),
        'v6': unique_id(family=6).hex().encode(),
        'v4_newline': unique_id().hex().encode() + b'\n',
        'raw_v4': unique_id(),
        'bad_checksum': (unique_id()[:127] + b'\x00').hex().encode(),
        'short': b'0123abcd',
    },
}

for target, seeds in corpora.items():
    d = os.path.join(HERE, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)
