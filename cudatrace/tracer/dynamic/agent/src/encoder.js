// x86-64 machine code for the thunks, as arrays of bytes: pure functions over numbers, no Frida API, so node runs
// them in a test (tests/tracer/dynamic/encoder_test.js). Addresses are numbers: user-space addresses are below
// 2^47 and numbers are exact integers below 2^53. Callers turn a NativePointer into a number once (num() in
// memory.js) and write the bytes with one copy (writeBytes). Hooking writes ~10 addresses per entry point,
// thousands per process: encoding them is plain arithmetic, no pointer operation.
'use strict';

const RSEQ_SIG = 0x53053053; // glibc's signature on x86, checked by the kernel at abort_ip - 4
const RSEQ_ABORT = 36; // the abort handler's offset in a descriptor block (sequenceBytes)
const NOPS16 = [0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x0f, 0x1f, 0x80, 0, 0, 0, 0]; // room for the Interceptor
// The shared detail listener's page (hooks.js, setupDispatch): NOPs the Interceptor overwrites, then jmp r10.
const DISPATCH_PAGE = NOPS16.concat([0x41, 0xff, 0xe2]);

// Little-endian 32 bits of an integer (a negative one in two's complement).
function le32(bytes, v) {
  bytes.push(v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff);
}

// Little-endian 64 bits of an integer below 2^53 (an address, a length).
function le64(bytes, v) {
  const lo = v >>> 0, hi = Math.floor(v / 4294967296) >>> 0;
  bytes.push(lo & 0xff, (lo >>> 8) & 0xff, (lo >>> 16) & 0xff, lo >>> 24,
    hi & 0xff, (hi >>> 8) & 0xff, (hi >>> 16) & 0xff, hi >>> 24);
}

// The rel32 of a branch whose next instruction is at `next`, to `target` (truncated to 32 bits, as the caller
// placed the two within branch range).
function rel32(next, target) {
  return (target - next) | 0;
}

// jmp rel32 at `at` to `target`: 5 bytes.
function jump5(at, target) {
  const b = [0xe9];
  le32(b, rel32(at + 5, target));
  return b;
}

// jmp [rip+0]; dq target: 14 bytes, reaching any address.
function jumpAbs(target) {
  return pushJumpAbs([], target);
}

// The same 14 bytes pushed onto `b`, which is returned (concat cost ~6 µs a call in the agent's interpreter).
function pushJumpAbs(b, target) {
  b.push(0xff, 0x25, 0, 0, 0, 0);
  le64(b, target);
  return b;
}

// The counting head of a thunk at o.thunk: increment the entry point's counter, then (o.budget > 0) branch to the
// detail stub at o.stub while the detail record's call count at o.detailCalls is below the budget, or (o.budget
// < 0) always. What follows the head goes on to the function. o.counter: the counter (row 0).
// o.rseq null: `movabs r11, &counter; [lock] inc qword [r11]` (o.locked).
// o.rseq {offset, cpus}: per CPU, in a restartable sequence described at o.descriptor (sequenceBytes); rows of
// o.rowSize bytes; a thread without a valid CPU number goes to o.fallback, which takes a locked increment of
// o.shared and jumps back after the commit.
// Returns {head, fallback (bytes for o.fallback, or null), start, length, at}: the sequence is head[start, start +
// length); `at` says where the four addresses lie (head: descriptor, counter, detailCalls; fallback: shared; -1 for
// one the head does not hold), so headFrom can make the head of another entry point from this one.
function countHead(o) {
  const b = [];
  let fallback = null, start = 0, length = 0;
  const at = { descriptor: -1, counter: -1, detailCalls: -1, shared: -1 };
  if (o.rseq !== null) {
    b.push(0x49, 0xbb); at.descriptor = b.length; le64(b, o.descriptor); // movabs r11, &descriptor
    b.push(0x64, 0x4c, 0x89, 0x1c, 0x25); le32(b, o.rseq.offset + 8); // mov qword fs:[rseq_cs], r11
    start = b.length;
    b.push(0x64, 0x44, 0x8b, 0x14, 0x25); le32(b, o.rseq.offset + 4); // mov r10d, dword fs:[cpu_id]
    b.push(0x41, 0x81, 0xfa); le32(b, o.rseq.cpus); // cmp r10d, cpus
    b.push(0x0f, 0x83); le32(b, rel32(o.thunk + b.length + 4, o.fallback)); // jae fallback
    const shift = Math.log2(o.rowSize);
    if (Number.isInteger(shift)) b.push(0x49, 0xc1, 0xe2, shift); // shl r10, log2(row size)
    else { b.push(0x4d, 0x69, 0xd2); le32(b, o.rowSize); } // imul r10, r10, row size
    b.push(0x49, 0xbb); at.counter = b.length; le64(b, o.counter); // movabs r11, &row0[slot]
    b.push(0x4b, 0xff, 0x04, 0x13); // inc qword [r11 + r10]: the commit, last instruction of the sequence
    length = b.length - start;
    // Fallback, for a thread whose CPU number is not valid: a locked increment in the last row.
    fallback = [0x49, 0xbb];
    at.shared = fallback.length;
    le64(fallback, o.shared); // movabs r11, &rowN[slot]
    fallback.push(0xf0, 0x49, 0xff, 0x03); // lock inc qword [r11]
    fallback.push(0xe9); le32(fallback, rel32(o.fallback + fallback.length + 4, o.thunk + b.length)); // jmp back
  } else {
    b.push(0x49, 0xbb); at.counter = b.length; le64(b, o.counter); // movabs r11, &counter (r11, r10: scratch)
    if (o.locked) b.push(0xf0); // lock prefix: exact under threads, ~20 cycles on some CPUs
    b.push(0x49, 0xff, 0x03); // inc qword [r11]
  }
  if (o.budget > 0) {
    // The detail listener counts the calls it saw; below the budget, take the stub. The counter is written only
    // while the budget lasts, so afterwards this is a read of a line every core holds unmodified.
    b.push(0x49, 0xbb); at.detailCalls = b.length; le64(b, o.detailCalls); // movabs r11, &detail.calls
    b.push(0x49, 0x81, 0x3b); le32(b, Math.min(o.budget, 0x7fffffff)); // cmp qword [r11], N
    b.push(0x0f, 0x82); le32(b, rel32(o.thunk + b.length + 4, o.stub)); // jb detail_stub
  } else if (o.budget < 0) {
    b.push(0xe9); le32(b, rel32(o.thunk + b.length + 4, o.stub)); // jmp detail_stub: every call
  }
  return { head: b, fallback, start, length, at };
}

// 64 bits of an integer below 2^53 at bytes[pos..pos+8), little-endian (bytes: an array or a typed array).
function put64(bytes, pos, v) {
  const lo = v >>> 0, hi = Math.floor(v / 4294967296) >>> 0;
  bytes[pos] = lo & 0xff; bytes[pos + 1] = (lo >>> 8) & 0xff; bytes[pos + 2] = (lo >>> 16) & 0xff; bytes[pos + 3] = lo >>> 24;
  bytes[pos + 4] = hi & 0xff; bytes[pos + 5] = (hi >>> 8) & 0xff; bytes[pos + 6] = (hi >>> 16) & 0xff; bytes[pos + 7] = hi >>> 24;
}

// The head (and fallback) of another entry point whose block has the same layout, from countHead's result `t` for
// one: only the four addresses differ (the branches inside the block are relative to it). Writes the head at
// bytes[0..) and the fallback at bytes[fallbackAt..); v: {descriptor, counter, detailCalls, shared}. Encoding every
// head afresh took ~11 µs an entry point in the agent's interpreter.
function headFrom(t, bytes, fallbackAt, v) {
  bytes.set(t.head, 0);
  for (const k of ['descriptor', 'counter', 'detailCalls']) if (t.at[k] >= 0) put64(bytes, t.at[k], v[k]);
  if (t.fallback !== null) {
    bytes.set(t.fallback, fallbackAt);
    put64(bytes, fallbackAt + t.at.shared, v.shared);
  }
}

// A restartable sequence's descriptor at `at` (struct rseq_cs, 32 bytes: version 0, flags 0 (restart on
// preemption, signal and migration), start_ip, post_commit_offset, abort_ip), the signature, and the abort handler
// at abort_ip: a jump to `restart`. 50 bytes; SEQUENCE_AT: where its three addresses lie.
const SEQUENCE_AT = { start: 8, abort: 24, restart: 42 };
function sequenceBytes(at, start, length, restart) {
  const b = [0, 0, 0, 0, 0, 0, 0, 0];
  le64(b, start);
  le64(b, length);
  le64(b, at + RSEQ_ABORT); // abort_ip
  le32(b, RSEQ_SIG); // at abort_ip - 4
  return pushJumpAbs(b, restart);
}

// The detail stub that goes to the one shared listener at `dispatch`: the record's address in r11, where to go
// on in r10 (`movabs r11, detail; movabs r10, orig; jmp [rip+0]; dq dispatch`). `orig` sits at byte 12.
// Where each stub holds the address it goes on to (rewritten in place by hooks.js, setStubTarget).
const DISPATCH_STUB_TARGET = 12, LISTENER_STUB_TARGET = 22;

function dispatchStub(detail, orig, dispatch) {
  const b = [0x49, 0xbb]; // movabs r11, &detail
  le64(b, detail);
  b.push(0x49, 0xba); // movabs r10, orig
  le64(b, orig);
  return pushJumpAbs(b, dispatch);
}

// A detail stub with a listener of its own: NOPs for the Interceptor, then a jump to `orig` (at byte 22).
function listenerStub(orig) {
  return pushJumpAbs(NOPS16.slice(), orig);
}

// `mov eax, dword fs:[offset + 4]; ret`: this thread's CPU number in its rseq area at fs:offset.
function cpuProbe(offset) {
  const b = [0x64, 0x8b, 0x04, 0x25];
  le32(b, offset + 4);
  b.push(0xc3);
  return b;
}

// The stopped world's signal handler (world.c; at `state`: the u32 ticket count, at 4 the release flag, at 8 the
// count of threads gone on, from 24 the interrupted instruction pointers): take a ticket, record where the thread
// was, yield until released.
function parkHandler(state) {
  const h = [0x49, 0xb9]; // movabs r9, &state
  le64(h, state);
  h.push(0x4c, 0x8b, 0x82, 0xa8, 0, 0, 0); // mov r8, [rdx + 168]: the interrupted rip in the ucontext
  h.push(0xb8, 1, 0, 0, 0); // mov eax, 1
  h.push(0xf0, 0x41, 0x0f, 0xc1, 0x01); // lock xadd [r9], eax: a ticket
  h.push(0x3d, 0, 4, 0, 0); // cmp eax, 1024
  h.push(0x73, 0x05); // jae spin
  h.push(0x4d, 0x89, 0x44, 0xc1, 0x18); // mov [r9 + rax*8 + 24], r8
  h.push(0x41, 0x83, 0x79, 0x04, 0x00); // spin: cmp dword [r9 + 4], 0
  h.push(0x75, 0x09); // jne out
  h.push(0xb8, 24, 0, 0, 0, 0x0f, 0x05); // sched_yield(): parked threads leave the CPUs to the others
  h.push(0xeb, 0xf0); // jmp spin
  h.push(0xf0, 0x41, 0xff, 0x41, 0x08); // out: lock inc dword [r9 + 8]
  h.push(0xc3);
  return h;
}

// Loaded by node (the encoder's test) rather than by Frida: hand the functions over.
if (typeof module !== 'undefined') {
  module.exports = { RSEQ_SIG, RSEQ_ABORT, NOPS16, le32, le64, rel32, jump5, jumpAbs, countHead, sequenceBytes,
    DISPATCH_STUB_TARGET, LISTENER_STUB_TARGET, DISPATCH_PAGE, dispatchStub, listenerStub, cpuProbe, parkHandler,
    put64, headFrom, SEQUENCE_AT };
}
