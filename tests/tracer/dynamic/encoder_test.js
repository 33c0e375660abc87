// The agent's x86-64 encoder (cudatrace/tracer/dynamic/agent/src/encoder.js) under node, without Frida: exact
// bytes. The expected bytes of the heads, jumps and stubs are GNU as 2.40's for the instructions in the comments
// (`.intel_syntax noprefix`, linked with `ld -Ttext=<thunk>` and the branch targets as --defsym symbols, so each
// rel32 is the assembler's). Run by tests/tracer/dynamic/test_agent_source.py: `node encoder_test.js`.
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');
const enc = require(path.join(__dirname, '..', '..', '..', 'cudatrace', 'tracer', 'dynamic', 'agent', 'src', 'encoder.js'));

let checks = 0;
function same(actual, expected, what) {
  const hex = a => Array.from(a, x => x.toString(16).padStart(2, '0')).join(' ');
  assert.equal(hex(actual), hex(expected), what);
  checks++;
}
function bytes(fn, v) {
  const b = [];
  fn(b, v);
  return b;
}

// le32 / le64
same(bytes(enc.le32, 0), [0, 0, 0, 0], 'le32 0');
same(bytes(enc.le32, 0x12345678), [0x78, 0x56, 0x34, 0x12], 'le32');
same(bytes(enc.le32, 0xffffffff), [0xff, 0xff, 0xff, 0xff], 'le32 max');
same(bytes(enc.le32, -0x98), [0x68, 0xff, 0xff, 0xff], 'le32 negative');
same(bytes(enc.le32, 0x53053053), [0x53, 0x30, 0x05, 0x53], 'le32 rseq signature');
same(bytes(enc.le64, 0), [0, 0, 0, 0, 0, 0, 0, 0], 'le64 0');
same(bytes(enc.le64, 50), [50, 0, 0, 0, 0, 0, 0, 0], 'le64 small');
same(bytes(enc.le64, 0xffffffff), [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0], 'le64 2^32-1');
same(bytes(enc.le64, 0x100000000), [0, 0, 0, 0, 1, 0, 0, 0], 'le64 2^32');
same(bytes(enc.le64, 0x7fffffffe000), [0x00, 0xe0, 0xff, 0xff, 0xff, 0x7f, 0, 0], 'le64 0x7fff_ffff_e000');
same(bytes(enc.le64, 0x7ffffffff000), [0x00, 0xf0, 0xff, 0xff, 0xff, 0x7f, 0, 0], 'le64 0x7fff_ffff_f000');
same(bytes(enc.le64, 0x7ffff7a1b2c8), [0xc8, 0xb2, 0xa1, 0xf7, 0xff, 0x7f, 0, 0], 'le64 a library address');
same(bytes(enc.le64, 0xffffffffffff), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0], 'le64 2^48-1');
same(bytes(enc.le64, Number.MAX_SAFE_INTEGER), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0], 'le64 2^53-1');
same(bytes(enc.le64, 0x8000000000ab), [0xab, 0, 0, 0, 0, 0x80, 0, 0], 'le64 kernel-half bit of 48');

// Jumps
const T = 0x7fff00010000; // a thunk's address
same(enc.jump5(0x7fff00010000, 0x7fff40010000), [0xe9, 0xfb, 0xff, 0xff, 0x3f], 'jmp rel32 forward'); // jmp t
same(enc.jump5(0x7fff40010000, 0x7fff00010000), [0xe9, 0xfb, 0xff, 0xff, 0xbf], 'jmp rel32 backward');
same(enc.jump5(0x1000, 0x1005), [0xe9, 0, 0, 0, 0], 'jmp rel32 to the next instruction');
assert.equal(enc.rel32(0x7fff00010005, 0x7fff00010000), -5);
// jmp qword ptr [rip + 0]; .quad 0x7ffffffff000
same(enc.jumpAbs(0x7ffffffff000), [0xff, 0x25, 0, 0, 0, 0, 0x00, 0xf0, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00], 'jmp [rip+0]');
assert.equal(enc.jumpAbs(T).length, 14);

// Counting heads. Common parameters: the entry's counter (row 0), the detail record's call count, the stub and
// the per-CPU fallback at their places in the block (hooks.js: stub at +224, fallback at +272).
const common = {
  thunk: T, stub: T + 0xe0, fallback: T + 0x110, counter: 0x7ffff7ff1238, detailCalls: 0x7ffffffff010, rseq: null,
  descriptor: 0, shared: 0, rowSize: 1 << 19, locked: true, budget: 1000,
};
// movabs r11, 0x7ffff7ff1238; lock inc qword ptr [r11]; movabs r11, 0x7ffffffff010; cmp qword ptr [r11], 1000; jb stub
const locked = enc.countHead(common);
same(locked.head, [0x49, 0xbb, 0x38, 0x12, 0xff, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xf0, 0x49, 0xff, 0x03, 0x49, 0xbb, 0x10,
  0xf0, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00, 0x49, 0x81, 0x3b, 0xe8, 0x03, 0x00, 0x00, 0x0f, 0x82, 0xbb, 0x00, 0x00,
  0x00], 'locked head');
assert.equal(locked.fallback, null);
// movabs r11, 0x7ffff7ff1238; inc qword ptr [r11]; jmp stub (--timing: every call takes the stub)
same(enc.countHead({ ...common, locked: false, budget: -1 }).head, [0x49, 0xbb, 0x38, 0x12, 0xff, 0xf7, 0xff, 0x7f,
  0x00, 0x00, 0x49, 0xff, 0x03, 0xe9, 0xce, 0x00, 0x00, 0x00], 'plain head, every call to the stub');
// movabs r11, 0x7ffff7ff1238; lock inc qword ptr [r11] (no detail calls)
same(enc.countHead({ ...common, budget: 0 }).head, [0x49, 0xbb, 0x38, 0x12, 0xff, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xf0,
  0x49, 0xff, 0x03], 'locked head, count only');

// Per CPU, with glibc's negative rseq offset (x86-64 TLS lies below the thread pointer):
//   movabs r11, 0x7ffff7fd0040; mov qword ptr fs:[-0x98], r11
//   mov r10d, dword ptr fs:[-0x9c]; cmp r10d, 192; jae fallback; shl r10, 19
//   movabs r11, 0x7ffff0001238; inc qword ptr [r11 + r10]
//   movabs r11, 0x7ffffffff010; cmp qword ptr [r11], 1000; jb stub
const perCpu = { ...common, rseq: { offset: -0xa0, cpus: 192 }, descriptor: 0x7ffff7fd0040, counter: 0x7ffff0001238 };
perCpu.shared = perCpu.counter + 192 * perCpu.rowSize; // the last row: threads without a CPU number
const pc = enc.countHead(perCpu);
same(pc.head, [0x49, 0xbb, 0x40, 0x00, 0xfd, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0x64, 0x4c, 0x89, 0x1c, 0x25, 0x68, 0xff,
  0xff, 0xff, 0x64, 0x44, 0x8b, 0x14, 0x25, 0x64, 0xff, 0xff, 0xff, 0x41, 0x81, 0xfa, 0xc0, 0x00, 0x00, 0x00, 0x0f,
  0x83, 0xe7, 0x00, 0x00, 0x00, 0x49, 0xc1, 0xe2, 0x13, 0x49, 0xbb, 0x38, 0x12, 0x00, 0xf0, 0xff, 0x7f, 0x00, 0x00,
  0x4b, 0xff, 0x04, 0x13, 0x49, 0xbb, 0x10, 0xf0, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00, 0x49, 0x81, 0x3b, 0xe8, 0x03,
  0x00, 0x00, 0x0f, 0x82, 0x8e, 0x00, 0x00, 0x00], 'per-CPU head');
// The sequence: from the CPU number's read to the commit (inc) inclusive.
assert.equal(pc.start, 19);
assert.equal(pc.length, 40);
// At the fallback: movabs r11, 0x7ffff6001238; lock inc qword ptr [r11]; jmp thunk+59 (after the commit)
same(pc.fallback, [0x49, 0xbb, 0x38, 0x12, 0x00, 0xf6, 0xff, 0x7f, 0x00, 0x00, 0xf0, 0x49, 0xff, 0x03, 0xe9, 0x18,
  0xff, 0xff, 0xff], 'per-CPU fallback');
// A row size that is no power of two, a positive offset, no detail calls:
//   ...; mov qword ptr fs:[0x98], r11; mov r10d, dword ptr fs:[0x94]; ...; imul r10, r10, 24000; ...
const imul = enc.countHead({ ...perCpu, rseq: { offset: 0x90, cpus: 192 }, rowSize: 24000, budget: 0 });
same(imul.head, [0x49, 0xbb, 0x40, 0x00, 0xfd, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0x64, 0x4c, 0x89, 0x1c, 0x25, 0x98, 0x00,
  0x00, 0x00, 0x64, 0x44, 0x8b, 0x14, 0x25, 0x94, 0x00, 0x00, 0x00, 0x41, 0x81, 0xfa, 0xc0, 0x00, 0x00, 0x00, 0x0f,
  0x83, 0xe7, 0x00, 0x00, 0x00, 0x4d, 0x69, 0xd2, 0xc0, 0x5d, 0x00, 0x00, 0x49, 0xbb, 0x38, 0x12, 0x00, 0xf0, 0xff,
  0x7f, 0x00, 0x00, 0x4b, 0xff, 0x04, 0x13], 'per-CPU head, imul');
assert.equal(imul.start + imul.length, imul.head.length);

// The rseq descriptor block (struct rseq_cs, the signature, the abort handler jumping back to the thunk).
const cs = 0x7ffff7fd0040;
same(enc.sequenceBytes(cs, T + pc.start, pc.length, T), [
  0, 0, 0, 0, 0, 0, 0, 0, // version, flags
  0x13, 0x00, 0x01, 0x00, 0xff, 0x7f, 0, 0, // start_ip
  40, 0, 0, 0, 0, 0, 0, 0, // post_commit_offset
  0x64, 0x00, 0xfd, 0xf7, 0xff, 0x7f, 0, 0, // abort_ip = cs + 36
  0x53, 0x30, 0x05, 0x53, // RSEQ_SIG
  0xff, 0x25, 0, 0, 0, 0, 0x00, 0x00, 0x01, 0x00, 0xff, 0x7f, 0, 0, // abort: jmp [rip+0]; dq thunk
], 'rseq descriptor');
assert.equal(enc.RSEQ_ABORT, 32 + 4);

// Stubs. movabs r11, 0x7fff12345678; movabs r10, 0x7fffabcdef01; jmp qword ptr [rip + 0]; .quad 0x7ffff7a00000
same(enc.dispatchStub(0x7fff12345678, 0x7fffabcdef01, 0x7ffff7a00000), [0x49, 0xbb, 0x78, 0x56, 0x34, 0x12, 0xff, 0x7f,
  0x00, 0x00, 0x49, 0xba, 0x01, 0xef, 0xcd, 0xab, 0xff, 0x7f, 0x00, 0x00, 0xff, 0x25, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0xa0, 0xf7, 0xff, 0x7f, 0x00, 0x00], 'dispatch stub');
const ls = enc.listenerStub(0x7fffabcdef01);
same(ls.slice(0, 16), enc.NOPS16, 'listener stub NOPs');
same(ls.slice(16), enc.jumpAbs(0x7fffabcdef01), 'listener stub jump');
// hooks.js's setStubTarget rewrites where a stub goes on: byte 12 (dispatch) or 22 (own listener).
assert.equal(enc.DISPATCH_STUB_TARGET, 12);
assert.equal(enc.LISTENER_STUB_TARGET, 22);
same(ls.slice(22), bytes(enc.le64, 0x7fffabcdef01), 'listener stub target at 22');
same(enc.dispatchStub(0x7fff12345678, 0x7fffabcdef01, 0x7ffff7a00000).slice(12, 20), bytes(enc.le64, 0x7fffabcdef01),
  'dispatch stub target at 12');
// mov eax, dword ptr fs:[-0x9c]; ret
same(enc.cpuProbe(-0xa0), [0x64, 0x8b, 0x04, 0x25, 0x64, 0xff, 0xff, 0xff, 0xc3], 'CPU number probe');
same(enc.parkHandler(0x7ffff7fd0000).slice(0, 10), [0x49, 0xb9, 0x00, 0x00, 0xfd, 0xf7, 0xff, 0x7f, 0, 0],
  'park handler: movabs r9, &state');

// A head made from another entry point's (headFrom: the template of a block at 0, four addresses written in) is
// byte for byte the head countHead encodes for it, in every counting mode; so is the descriptor from its template.
const FALLBACK_AT = 0x110, STUB_AT = 0xe0, ROW = 1 << 19;
let seed = 7;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed; };
const addr = () => 0x7f0000000000 + rand() * 4096 + (rand() % 4096);
const modes = [
  { rseq: null, locked: true, budget: 1000 }, { rseq: null, locked: false, budget: 1000 },
  { rseq: null, locked: true, budget: 0 }, { rseq: null, locked: true, budget: -1 },
  { rseq: { offset: -0xa0, cpus: 16 }, locked: true, budget: 1000 }, { rseq: { offset: -0xa0, cpus: 200 }, locked: true, budget: -1 },
  { rseq: { offset: -0xa0, cpus: 3 }, locked: true, budget: 0 },
];
for (const mode of modes) {
  const t = enc.countHead(Object.assign({ thunk: 0, fallback: FALLBACK_AT, stub: STUB_AT, counter: 0, descriptor: 0,
    shared: 0, detailCalls: 0, rowSize: ROW }, mode));
  const tmpl = { head: Uint8Array.from(t.head), fallback: t.fallback === null ? null : Uint8Array.from(t.fallback), at: t.at };
  const seq = Uint8Array.from(enc.sequenceBytes(0, t.start, t.length, 0));
  for (let i = 0; i < 20; i++) {
    const a = addr(), thunk = a - (a % 64);
    const v = { descriptor: addr(), counter: addr(), detailCalls: addr(), shared: addr() };
    const want = enc.countHead(Object.assign({ thunk, fallback: thunk + FALLBACK_AT, stub: thunk + STUB_AT, rowSize: ROW }, v, mode));
    const block = new Uint8Array(FALLBACK_AT + 32);
    enc.headFrom(tmpl, block, FALLBACK_AT, v);
    same(block.slice(0, want.head.length), want.head, 'head from the template ' + JSON.stringify(mode));
    if (want.fallback !== null) {
      same(block.slice(FALLBACK_AT, FALLBACK_AT + want.fallback.length), want.fallback, 'fallback from the template');
      const d = seq.slice();
      enc.put64(d, enc.SEQUENCE_AT.start, thunk + t.start);
      enc.put64(d, enc.SEQUENCE_AT.abort, v.descriptor + enc.RSEQ_ABORT);
      enc.put64(d, enc.SEQUENCE_AT.restart, thunk);
      same(d, enc.sequenceBytes(v.descriptor, thunk + want.start, want.length, thunk), 'descriptor from the template');
    }
  }
}

console.log('encoder: ' + checks + ' byte checks passed');
