/*
 * cudatrace's Frida agent: runs inside the traced process, hooks every exported function of every CUDA library
 * the process loads (also late, by dlopen/LoadLibrary), counts calls in native code and sends cumulative
 * batches to the host. Configured by the host through rpc.exports.configure(config); message names come in
 * the configuration (cudatrace/tracer/dynamic/protocol.py declares them once).
 *
 * The common path is native: on x86-64 each entry point's prologue jumps (Interceptor.replaceFast, or a direct
 * patch) to a thunk generated here, allocated within branch range of the library. On Linux with glibc's rseq
 * area (glibc >= 2.35) it counts per CPU in a restartable sequence, without a locked instruction:
 *
 *     movabs r11, &descriptor ; mov fs:[rseq_cs], r11     ; r10 and r11 are scratch in both x64 conventions
 *   start:
 *     mov r10d, fs:[cpu_id] ; cmp r10d, cpus ; jae fallback (lock inc in a shared row)
 *     shl r10, log2(row) ; movabs r11, &counter ; inc qword [r11 + r10]   ; commit; preempted before: restart
 *     cmp qword [&detail.calls], N ; jb detail_stub     ; the first N calls: statuses, callers, times (detail.c)
 *     <the function's first instructions, relocated> ; jmp back into the function
 *
 * Elsewhere the head is `movabs r11, &counter; lock inc qword [r11]` (plain `inc` with --fast-counters).
 * The counters live in a shared file mapping (Linux) that the host reads after the process is gone, so counts
 * survive SIGKILL. Other CPUs fall back to Interceptor.attach with the native listener (slower; reported).
 */
'use strict';

let M = null; // message names, from the host
let cfg = null;
let cm = null; // CModule with the detail listener
let nowNs = null;
const IS_X64 = Process.arch === 'x64';
const PAGE = Process.pageSize;

// The detail record's layout is detail.c's (struct CtDetail), read from its cudatrace_detail_layout table once
// the CModule is built (readDetailLayout): defined once, in C.
let DETAIL_SIZE = 0;
let D_FIRST = 0, D_TIME = 0, D_CALLS = 0, D_N_CODES = 0, D_N_CALLERS = 0, D_CODES = 0, D_CODE_COUNTS = 0,
  D_OTHER_CODES = 0, D_CALLERS = 0, D_CALLER_COUNTS = 0, D_OTHER_CALLERS = 0;
let N_STATUSES = 0, N_CALLERS = 0;

function readDetailLayout(table) {
  const v = [];
  for (let i = 0; i < 14; i++) v.push(table.add(8 * i).readU64().toNumber());
  [DETAIL_SIZE, D_FIRST, D_TIME, D_CALLS, D_N_CODES, D_N_CALLERS, D_CODES, D_CODE_COUNTS, D_OTHER_CODES, D_CALLERS,
    D_CALLER_COUNTS, D_OTHER_CALLERS, N_STATUSES, N_CALLERS] = v;
}

const entries = []; // id -> {id, module, path, fn, aliases, slot, detail, js}
const lastSent = []; // id -> calls at last send
const hookedAddrs = new Map(); // original function address (string) -> entry id
const procThunks = new Map(); // returned pointer (string) -> thunk
const seenModules = new Map(); // path -> true
const seenNames = new Set(); // file names of the modules in seenModules
const callerNames = new Map(); // return address (string) -> module name
const lookups = new Map(); // key -> {symbol, version, flags, found, count, via}
const exportTables = new Map(); // uuid -> {uuid, count, statuses}
const skipped = []; // [module, function, reason]
let libPatterns = [];
let exportPattern = null;
let counters = null; // base of the counter array
let counterCap = 0;
let counterUsed = 0;
let shmPath = null;
let pool = null; // {base, used, cap} for thunks of pointers returned by cuGetProcAddress
let events = [];
let eventsDropped = 0;
let seq = 0;
let scanning = 0; // id of the thread scanning modules, 0 when none
let flushTimer = null;
let exiting = false;
let loading = 0; // dlopen/LoadLibrary calls under way, all threads
let lateScan = false; // scanning inside a dlopen hook: patch prologues directly
let livePatching = false; // the program is running (attached, or after start-up): write jumps atomically
const keep = [];
const hookCounts = { inline: 0, trampoline: 0, clone: 0, far: 0 }; // Memory.alloc'd blocks are freed when their last JS handle goes: hold them for the process's life

function u64(p) {
  return p.readU64().toNumber();
}

// ---------------------------------------------------------------------------------------------------------
// Counter storage

function openSharedCounters(path, cap) {
  // Linux only: a MAP_SHARED file mapping outlives the process for the host to read.
  const open = new NativeFunction(Module.getGlobalExportByName('open'), 'int', ['pointer', 'int', 'int']);
  const ftruncate = new NativeFunction(Module.getGlobalExportByName('ftruncate'), 'int', ['int', 'int64']);
  const mmap = new NativeFunction(Module.getGlobalExportByName('mmap'), 'pointer',
    ['pointer', 'size_t', 'int', 'int', 'int', 'int64']);
  const close = new NativeFunction(Module.getGlobalExportByName('close'), 'int', ['int']);
  const fd = open(Memory.allocUtf8String(path), 0x42 /* O_RDWR|O_CREAT */, 0x180 /* 0600 */);
  if (fd < 0) return null;
  const size = counterRows * cap * 8;
  if (ftruncate(fd, size) !== 0) { close(fd); return null; }
  const p = mmap(NULL, size, 3 /* PROT_READ|PROT_WRITE */, 1 /* MAP_SHARED */, fd, 0);
  close(fd);
  if (p.equals(ptr(-1))) return null;
  return p;
}

// Anonymous memory of the agent's own, which Frida never frees: it stays valid in a forked child.
function ownMap(size) {
  if (Process.platform !== 'linux') return null; // Windows has no fork: callers fall back to Memory.alloc
  const mmap = new NativeFunction(Module.getGlobalExportByName('mmap'), 'pointer',
    ['pointer', 'size_t', 'int', 'int', 'int', 'int64']);
  const p = mmap(NULL, size, 7 /* PROT_READ|WRITE|EXEC */, 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
  return p.equals(ptr(-1)) ? null : p;
}

// Code and data the thunks use must outlive the script: when the host detaches (--pid, Ctrl-C) Frida frees what
// Memory.alloc gave, while other threads may still be running in a thunk, and functions patched directly keep
// jumping there. Thunks must be within branch range (rel32) of their library: on Linux they are mapped with mmap
// at free addresses tried outward from the library, elsewhere (or when none is free) by Memory.alloc.
function nearMap(size, m, maxDistance) {
  if (Process.platform === 'linux') {
    const mmap = new NativeFunction(Module.getGlobalExportByName('mmap'), 'pointer',
      ['pointer', 'size_t', 'int', 'int', 'int', 'int64']);
    const munmap = new NativeFunction(Module.getGlobalExportByName('munmap'), 'int', ['pointer', 'size_t']);
    const num = p => parseInt(p.toString(16), 16);
    const lo = num(m.base), hi = lo + m.size, step = 0x100000;
    for (let k = 1; k <= 1536; k++) {
      for (const hint of [lo - k * step - size, hi + k * step]) {
        if (hint < 0x100000) continue;
        const aligned = hint - (hint % step);
        // MAP_FIXED_NOREPLACE: this address or nothing (older kernels take it as a hint; the check below holds)
        const p = mmap(ptr(aligned), size, 7, 0x22 | 0x100000, -1, 0);
        if (p.equals(ptr(-1))) continue;
        const a = num(p);
        if (Math.abs(a - lo) < maxDistance && Math.abs(a + size - lo) < maxDistance) return p;
        munmap(p, size);
      }
    }
  }
  let p;
  try {
    p = Memory.alloc(size, { near: m.base, maxDistance });
  } catch (err) {
    // Nothing free within branch range (attached late, CUDA has reserved the address space around the library):
    // on Linux the thunks go anywhere and the prologues get a 14-byte absolute jump instead (farJump).
    const far = Process.platform === 'linux' && IS_X64 ? ownMap(size) : null;
    if (far === null) throw err;
    far.far = true;
    return far;
  }
  keep.push(p);
  Memory.protect(p, size, 'rwx');
  return p;
}

let detailPool = null; // {base, used, cap}

function lastingAlloc(size) {
  const p = ownMap(size);
  if (p !== null) return p;
  const q = Memory.alloc(size);
  keep.push(q);
  return q;
}

// Functions the agent patched itself (patchJump) with their original first bytes: a fork handler puts them back
// in the child, whose Frida agent unloads this script and frees its thunks (the child's own agent, loaded by
// child gating, then hooks them afresh and counts the child's calls). Layout: u64 count, then per patch u64
// address and 8 original bytes (5 are written back).
const RESTORE_SIZE = 1 << 20;
let restoreTable = null;

function installForkRestore() {
  if (!IS_X64 || Process.platform !== 'linux') return;
  const reg = Module.findGlobalExportByName('__register_atfork');
  const mprotect = Module.findGlobalExportByName('mprotect');
  if (reg === null || mprotect === null) return;
  const table = ownMap(RESTORE_SIZE);
  const code = table === null ? null : ownMap(PAGE);
  if (code === null) return;
  const w = new X86Writer(code);
  w.putPushReg('rbx'); w.putPushReg('r12'); w.putPushReg('r13'); // the calls below need rsp 16-aligned
  w.putMovRegAddress('rbx', table);
  w.putMovRegRegPtr('r12', 'rbx');
  w.putAddRegImm('rbx', 8);
  w.putLabel('loop');
  w.putTestRegReg('r12', 'r12');
  w.putJccNearLabel('je', 'done', 'no-hint');
  w.putMovRegRegPtr('rdi', 'rbx');
  w.putTestRegReg('rdi', 'rdi'); // a row of an unloaded library (forgetPatches)
  w.putJccNearLabel('je', 'next', 'no-hint');
  for (const prot of [7, 5]) { // make the page(s) writable, then back to r-x once written
    // Only the page(s) the 5 bytes touch: the page after a library's code may be its data.
    w.putMovRegRegPtr('rdi', 'rbx');
    w.putBytes([0x48, 0x8d, 0x77, 0x04]); // lea rsi, [rdi + 4]
    w.putBytes([0x48, 0x81, 0xe7, 0x00, 0xf0, 0xff, 0xff]); // and rdi, ~0xfff
    w.putBytes([0x48, 0x81, 0xe6, 0x00, 0xf0, 0xff, 0xff]); // and rsi, ~0xfff
    w.putBytes([0x48, 0x29, 0xfe]); // sub rsi, rdi
    w.putBytes([0x48, 0x81, 0xc6, 0x00, 0x10, 0x00, 0x00]); // add rsi, 4096: one page or two
    w.putMovRegU32('edx', prot);
    w.putCallAddressWithArguments(mprotect, []);
    if (prot === 7) {
      w.putMovRegRegPtr('rdi', 'rbx');
      w.putMovRegRegOffsetPtr('rax', 'rbx', 8);
      w.putBytes([0x89, 0x07, 0x48, 0xc1, 0xe8, 0x20, 0x88, 0x47, 0x04]); // mov [rdi], eax; shr rax, 32; mov [rdi+4], al
    }
  }
  w.putLabel('next');
  w.putAddRegImm('rbx', 16);
  w.putDecReg('r12');
  w.putJmpNearLabel('loop');
  w.putLabel('done');
  w.putPopReg('r13'); w.putPopReg('r12'); w.putPopReg('rbx');
  w.putRet();
  w.flush();
  w.dispose();
  const register = new NativeFunction(reg, 'int', ['pointer', 'pointer', 'pointer', 'pointer']);
  if (register(NULL, NULL, code, NULL) === 0) restoreTable = table;
}

function rememberPatch(fn, original) {
  if (restoreTable === null) return;
  const n = u64(restoreTable);
  if (8 + (n + 1) * 16 > RESTORE_SIZE) return;
  const row = restoreTable.add(8 + n * 16);
  row.writePointer(fn);
  const bytes = new Uint8Array(fn.readByteArray(8));
  if (original !== undefined) bytes.set(original.subarray(0, 5));
  row.add(8).writeByteArray(bytes.buffer);
  restoreTable.writeU64(n + 1); // last: a fork between the two writes sees the table without this row
}

function forgetLastPatch(fn) {
  if (restoreTable === null) return;
  const n = u64(restoreTable);
  if (n > 0 && restoreTable.add(8 + (n - 1) * 16).readPointer().equals(fn)) restoreTable.writeU64(n - 1);
}

// A library that goes away (dlclose) takes its patches with it: its rows must not write into whatever is
// mapped there next.
function forgetPatches(m) {
  if (restoreTable === null) return;
  const n = u64(restoreTable);
  const lo = m.base, hi = m.base.add(m.size);
  for (let i = 0; i < n; i++) {
    const row = restoreTable.add(8 + i * 16);
    const a = row.readPointer();
    if (a.compare(lo) >= 0 && a.compare(hi) < 0) row.writePointer(NULL);
  }
}

function allocCounter() {
  if (counterUsed >= counterCap) throw new Error('counter space exhausted');
  return counterUsed++;
}

// ---------------------------------------------------------------------------------------------------------
// Machine code for the thunks (x86-64)

// Hooking writes ~10 of these per entry point, thousands per process: two pointer operations each, not 24.
function le64(bytes, value) {
  const p = value instanceof NativePointer ? value : ptr(value);
  const lo = p.toUInt32(), hi = p.shr(32).toUInt32();
  bytes.push(lo & 0xff, (lo >>> 8) & 0xff, (lo >>> 16) & 0xff, lo >>> 24, hi & 0xff, (hi >>> 8) & 0xff, (hi >>> 16) & 0xff,
    hi >>> 24);
}

function le32(bytes, v) {
  bytes.push(v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff);
}

// Frida converts a plain array element by element (~1 µs a byte); a typed array's buffer goes in one copy.
function writeBytes(at, bytes) {
  at.writeByteArray(new Uint8Array(bytes).buffer);
}

// Per-CPU counting (Linux x86-64 with glibc >= 2.35, which registers a restartable sequence area for every
// thread): each CPU has its own row of counters, and the increment is a plain `inc` inside a restartable
// sequence, so it is exact without a locked instruction (a `lock inc` costs ~8.5 ns a call on some server CPUs,
// the sequence ~1 ns). When the kernel preempts, migrates or signals the thread between reading its CPU number and
// the increment, it resumes the thread at the abort handler, which starts over. Rows 0..cpus-1 are the CPUs';
// row `cpus` takes locked increments from threads without a valid CPU number (no rseq area of their own).
let rseq = null; // {offset, cpus} when per-CPU counting is on
let counterRows = 1;
let csPool = null; // {base, used, cap}: rseq descriptors, signatures and abort handlers (64 bytes each)
const RSEQ_SIG = 0x53053053; // glibc's signature on x86
const CS_SIZE = 64;

function setupPerCpu() {
  if (!IS_X64 || Process.platform !== 'linux' || cfg.counters !== 'per-cpu') return null;
  const off = Module.findGlobalExportByName('__rseq_offset');
  const size = Module.findGlobalExportByName('__rseq_size');
  const nprocs = Module.findGlobalExportByName('get_nprocs_conf');
  if (off === null || size === null || nprocs === null) return null; // glibc older than 2.35
  if (size.readU32() === 0) return null; // glibc did not register (tunable glibc.pthread.rseq=0, or the kernel refused)
  const cpus = new NativeFunction(nprocs, 'int', [])();
  if (cpus <= 0 || cpus > 4096) return null;
  const offset = off.readS64().toNumber();
  // Read this thread's CPU number the way the thunks do, as a check of the offset.
  const probe = ownMap(PAGE);
  if (probe === null) return null;
  const b = [0x64, 0x8b, 0x04, 0x25]; // mov eax, dword fs:[offset + 4]
  le32(b, offset + 4);
  b.push(0xc3);
  writeBytes(probe, b);
  const cpu = new NativeFunction(probe, 'uint32', [])();
  if (cpu >= cpus) return null;
  return { offset, cpus };
}

// A descriptor for the restartable sequence [start, start + length) of one thunk, with the signature the kernel
// checks before abort_ip and the abort handler (a jump back to the thunk's start). Descriptors live in memory of
// the agent's own that Frida never frees: a thread's rseq area keeps pointing at the last one it used, and the
// kernel reads it (signature included) on every preemption, also in a forked child after Frida freed the thunks.
function newSequence(start, length, restart) {
  if (csPool === null || csPool.used === csPool.cap) {
    const cap = 4096;
    const base = ownMap(cap * CS_SIZE);
    if (base === null) throw new Error('no memory for restartable sequences');
    csPool = { base, used: 0, cap };
  }
  const cs = csPool.base.add(csPool.used * CS_SIZE);
  csPool.used++;
  const b = [0, 0, 0, 0, 0, 0, 0, 0]; // version 0, flags 0: restart on preemption, signal and migration
  le64(b, start);
  le64(b, length);
  le64(b, cs.add(36)); // abort_ip
  le32(b, RSEQ_SIG); // at abort_ip - 4
  b.push(0xff, 0x25, 0, 0, 0, 0); // abort: jmp [rip+0]
  le64(b, restart);
  writeBytes(cs, b);
  return cs;
}

// The counting head of a thunk at L.thunk for entry e; what follows it (the tail) goes on to the original
// function. The first N calls (detail budget) branch to the stub at L.stub, which carries the detail listener.
function countBytes(L, e) {
  const slotAddr = counters.add(e.slot * 8);
  const b = [];
  if (rseq !== null) {
    const csAt = b.length + 2;
    b.push(0x49, 0xbb); le64(b, NULL); // movabs r11, &descriptor (filled in below)
    b.push(0x64, 0x4c, 0x89, 0x1c, 0x25); le32(b, rseq.offset + 8); // mov qword fs:[rseq_cs], r11
    const start = b.length;
    b.push(0x64, 0x44, 0x8b, 0x14, 0x25); le32(b, rseq.offset + 4); // mov r10d, dword fs:[cpu_id]
    b.push(0x41, 0x81, 0xfa); le32(b, rseq.cpus); // cmp r10d, cpus
    b.push(0x0f, 0x83); le32(b, L.fallback.sub(L.thunk.add(b.length + 4)).toInt32()); // jae fallback
    const shift = Math.log2(counterCap * 8);
    if (Number.isInteger(shift)) b.push(0x49, 0xc1, 0xe2, shift); // shl r10, log2(row size)
    else { b.push(0x4d, 0x69, 0xd2); le32(b, counterCap * 8); } // imul r10, r10, row size
    b.push(0x49, 0xbb); le64(b, slotAddr); // movabs r11, &row0[slot]
    b.push(0x4b, 0xff, 0x04, 0x13); // inc qword [r11 + r10]: the commit, last instruction of the sequence
    const post = b.length;
    const cs = newSequence(L.thunk.add(start), post - start, L.thunk);
    const a = [];
    le64(a, cs);
    for (let i = 0; i < 8; i++) b[csAt + i] = a[i];
    // Fallback, for a thread whose CPU number is not valid: a locked increment in the last row.
    const f = [0x49, 0xbb];
    le64(f, counters.add((rseq.cpus * counterCap + e.slot) * 8)); // movabs r11, &rowN[slot]
    f.push(0xf0, 0x49, 0xff, 0x03); // lock inc qword [r11]
    f.push(0xe9); le32(f, L.thunk.add(post).sub(L.fallback.add(f.length + 4)).toInt32()); // jmp back after the commit
    writeBytes(L.fallback, f);
  } else {
    b.push(0x49, 0xbb); le64(b, slotAddr); // movabs r11, &counter (r11 and r10 are scratch in both x64 conventions)
    if (cfg.counters !== 'plain') b.push(0xf0); // lock prefix: exact under threads, ~20 cycles on some CPUs
    b.push(0x49, 0xff, 0x03); // inc qword [r11]
  }
  const n = cfg.detailCalls;
  if (n > 0) {
    // The detail listener counts the calls it saw; below the budget, take the stub. The counter is written only
    // while the budget lasts, so afterwards this is a read of a line every core holds unmodified.
    b.push(0x49, 0xbb); le64(b, e.detail.add(D_CALLS)); // movabs r11, &detail.calls
    b.push(0x49, 0x81, 0x3b); le32(b, Math.min(n, 0x7fffffff)); // cmp qword [r11], N
    b.push(0x0f, 0x82); le32(b, L.stub.sub(L.thunk.add(b.length + 4)).toInt32()); // jb detail_stub
  } else if (n < 0) {
    b.push(0xe9); le32(b, L.stub.sub(L.thunk.add(b.length + 4)).toInt32()); // jmp detail_stub: every call
  }
  return b;
}

// One hook's block of code: the thunk, the detail stub, the per-CPU fallback and room for a whole copy of a short
// function.
const THUNK_SIZE = 224, STUB_SIZE = 48, FALLBACK_SIZE = 32, CLONE_SIZE = 192;
const BLOCK_SIZE = THUNK_SIZE + STUB_SIZE + FALLBACK_SIZE + CLONE_SIZE;

function blockAt(code) {
  const stub = code.add(THUNK_SIZE), fallback = stub.add(STUB_SIZE);
  return { thunk: code, stub, fallback, clone: fallback.add(FALLBACK_SIZE) };
}

function jumpTail(at, orig) {
  const b = [0xff, 0x25, 0, 0, 0, 0]; // jmp [rip+0]
  le64(b, orig);
  writeBytes(at, b);
}

// The fastest tail: the function's first instructions, relocated right after the counting head, then a jump
// back into the function. No trip through the Interceptor's trampoline, and the hot path stays in one or two
// cache lines. Up to 16 bytes are taken (the Interceptor may overwrite that many; hookExport checks how many it
// did). Returns the number of bytes relocated, or 0 when they do not relocate.
let relocation = null; // {w, r}: one writer and relocator, reset for each function (creating them costs more)

function relocatePrologue(fn, at, limit) {
  if (relocation === null) {
    const w = new X86Writer(at, { pc: at });
    relocation = { w, r: new X86Relocator(fn, w) };
  } else {
    relocation.w.reset(at, { pc: at });
    relocation.r.reset(fn, relocation.w);
  }
  const { w, r } = relocation;
  try {
    let n = 0;
    while (n < 16) {
      const next = r.readOne();
      if (next === 0) break;
      n = next;
      if (r.eob || r.eoi) break;
    }
    if (n < 5) return 0;
    r.writeAll();
    if (!r.eoi) w.putJmpAddress(fn.add(n));
    w.flush();
    return at.add(w.offset).compare(limit) <= 0 ? n : 0;
  } catch (_) {
    return 0;
  }
}

// A quick conservative test first (detail.c, cudatrace_may_branch_into): most functions have no relative branch
// that could land inside the `n` bytes, and only those with one are decoded here, ~0.1 ms a function (a third
// of the hooking time before the test). `limit` is the end of the module: the test reads 262 bytes.
let mayBranchFn = null;

function mayBranchInto(fn, n, limit) {
  if (limit === undefined || fn.add(262).compare(limit) > 0) return true;
  if (mayBranchFn === null) mayBranchFn = new NativeFunction(cm.cudatrace_may_branch_into, 'int', ['pointer', 'int']);
  return mayBranchFn(fn, n) !== 0;
}

// Before a prologue is overwritten: no branch in the function's first 256 bytes lands inside the `n` bytes
// replaced (a jump written there would be entered in its middle). A linear sweep to the function's end (its
// symbol's size; without one, the first `ret`).
function noBranchInto(fn, n, limit, size) {
  if (!mayBranchInto(fn, n, limit)) return true;
  const end = fn.add(n);
  const sized = size !== undefined && size > 0;
  const stop = sized ? Math.min(size, 256) : 256;
  let p = fn;
  try {
    while (p.sub(fn).toInt32() < stop) {
      const ins = Instruction.parse(p);
      const mn = ins.mnemonic;
      if (mn.startsWith('j') || mn.startsWith('loop') || mn === 'call') {
        const op = ins.operands[0];
        if (op !== undefined && op.type === 'imm') {
          const t = ptr(op.value.toString());
          if (t.compare(fn) > 0 && t.compare(end) < 0) return false;
        } else if (mn.startsWith('j') && mn !== 'jmp') {
          return false;
        }
      }
      if (!sized && (mn === 'ret' || mn === 'int3' || mn === 'hlt' || mn === 'ud2')) break;
      p = ins.next;
    }
  } catch (_) {
    return false;
  }
  return true;
}

// How many bytes at the start of fn differ from `before` (what the Interceptor overwrote).
function patchedExtent(fn, before) {
  const now = new Uint8Array(fn.readByteArray(before.length));
  let end = 0;
  for (let i = 0; i < before.length; i++) if (now[i] !== before[i]) end = i + 1;
  return end;
}

// 16 bytes of NOPs give the Interceptor room to relocate.
const NOPS16 = [0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x0f, 0x1f, 0x80, 0, 0, 0, 0];

// One detail listener for all entry points (x86-64): every detail stub loads its entry's record into r11 and
// where it goes on into r10, then jumps here; the listener (detail.c) takes the record from r11, and the code
// after the NOPs jumps to r10. One Interceptor.attach per process instead of one per entry point, which cost
// ~0.15 ms each (0.6 s of a PyTorch process's start-up). r10 and r11 are scratch at a call in both x64
// conventions, and the Interceptor gives the listener's code the registers it was entered with.
let dispatch = null;

function setupDispatch() {
  if (!IS_X64 || cfg.detailCalls === 0 || cfg.events) return null; // events: a JavaScript listener per stub
  const code = lastingAlloc(PAGE);
  Memory.protect(code, PAGE, 'rwx');
  writeBytes(code, NOPS16.concat([0x41, 0xff, 0xe2])); // jmp r10
  Interceptor.attach(code, cm);
  Interceptor.flush();
  return code;
}

// The stub the first calls go through: to the shared listener, or (no dispatch) its own NOPs for the
// Interceptor and a jump to `orig`. Where it goes on can be changed later (setStubTarget).
function stubBytes(orig, e) {
  if (dispatch !== null) {
    const b = [0x49, 0xbb]; // movabs r11, &detail
    le64(b, e.detail);
    b.push(0x49, 0xba); // movabs r10, orig
    le64(b, orig);
    b.push(0xff, 0x25, 0, 0, 0, 0); // jmp [rip+0]
    le64(b, dispatch);
    return b;
  }
  const b = NOPS16.concat([0xff, 0x25, 0, 0, 0, 0]); // jmp [rip+0]
  le64(b, orig);
  return b;
}

function setStubTarget(stub, target) {
  stub.add(dispatch !== null ? 12 : 22).writePointer(target);
}

function newDetail(_index) {
  if (detailPool === null || detailPool.used === detailPool.cap) {
    const cap = 1024;
    detailPool = { base: lastingAlloc(cap * DETAIL_SIZE), used: 0, cap };
  }
  const d = detailPool.base.add(detailPool.used * DETAIL_SIZE);
  detailPool.used++;
  d.writeByteArray(new ArrayBuffer(DETAIL_SIZE));
  return d;
}

function newEntry(module, path, fn, aliases) {
  const id = entries.length;
  const e = { id, module, path, fn, aliases, slot: -1, detail: null, js: null };
  entries.push(e);
  lastSent.push(-1);
  return e;
}

// A thunk + stub pair at `code` for entry e whose tail jumps to `orig` (pointers handed out by cuGetProcAddress).
function writeThunk(code, e, orig) {
  const L = blockAt(code);
  const head = countBytes(L, e);
  writeBytes(L.thunk, head);
  jumpTail(L.thunk.add(head.length), orig);
  writeStub(L.stub, e, orig);
  return L.thunk;
}

function writeStub(stub, e, orig) {
  writeBytes(stub, stubBytes(orig, e));
  if (cfg.detailCalls !== 0 && dispatch === null) {
    Interceptor.attach(stub, cm, e.detail);
    if (cfg.events) attachEvents(stub, e);
  }
}

function nearJumpTo(fn, target) {
  return fn.readU8() === 0xe9 && fn.add(5).add(fn.add(1).readS32()).equals(target);
}

// The block at `code` for entry e: the counting head, then fn's first instructions relocated after it (`own` bytes
// of them; 0 when they do not relocate) and a jump back into fn.
function buildThunk(fn, code, e) {
  const L = blockAt(code);
  const head = countBytes(L, e);
  writeBytes(L.thunk, head);
  const tail = L.thunk.add(head.length);
  return { L, tail, own: relocatePrologue(fn, tail, L.stub) };
}

// Hook an exported function: counting head, then (best) its relocated prologue, else a jump to the
// Interceptor's trampoline, else (a short function Frida declines) a jump to a whole copy of it.
//
// In a running process (attached, or a library loaded later by other means than dlopen) other threads may be
// executing the prologue while it is overwritten (world.c says why that crashes programs). There the agent
// writes the jumps itself with the other threads stopped (finishPending), once the Interceptor has committed the
// module's detail stubs, and puts the original bytes back before the host detaches (release); without a stopped
// world (not Linux) it writes them with one atomic store. Returns the method, or 'pending'.
function hookExport(fn, code, e, next, pending, limit, size) {
  // A branch inside the function to its first 5 bytes would land in the middle of the jump written there: no
  // hook that overwrites the start is safe (the Interceptor does not see every such loop, and a program whose
  // function loops back to its second instruction crashed). A branch to later bytes of the relocated prologue
  // is fine: those bytes stay as they were.
  if (!noBranchInto(fn, 5, limit, size)) throw new Error('a branch inside it lands in its first 5 bytes');
  const before = new Uint8Array(fn.readByteArray(32));
  const { L, tail, own } = buildThunk(fn, code, e);
  if (own === 0) jumpTail(tail, fn); // a placeholder until the real target is known
  writeStub(L.stub, e, own !== 0 ? tail : fn);
  const h = { fn, L, e, tail, own, before, next, limit, size, how: 'inline' };
  const direct = own !== 0;
  // Nothing runs the library's code yet (its dlopen has not returned, or the spawned program has not started):
  // the jump goes in directly, without the Interceptor's transaction per function.
  if (direct && (lateScan || !livePatching) && patchJump(fn, L.thunk, false)) return 'inline';
  if (!lateScan && livePatching && world !== null) {
    if (!direct) {
      if (!buildClone(fn, L.clone, next)) throw new Error('cannot be hooked safely while the program runs');
      jumpTail(tail, L.clone);
      setStubTarget(L.stub, L.clone);
      h.how = 'clone';
    }
    pending.push(h);
    return 'pending';
  }
  if (direct && !lateScan && livePatching && atomicallyPatchable(fn)) {
    pending.push(h);
    return 'pending';
  }
  return hookWithInterceptor(h);
}

function hookWithInterceptor(h) {
  const { fn, L, tail, own, before, next } = h;
  let orig;
  try {
    orig = Interceptor.replaceFast(fn, L.thunk);
  } catch (err) {
    // Frida declines functions too short to relocate; a short straight-line function can be copied whole.
    if (!buildClone(fn, L.clone, next)) throw err;
    jumpTail(tail, L.clone);
    setStubTarget(L.stub, L.clone);
    if (!lateScan && livePatching) Interceptor.flush(); // the stub's listener before the thunk is reachable
    if (!patchJump(fn, L.thunk, !lateScan && livePatching)) {
      throw new Error('too short to hook while the program runs (no atomic patch)');
    }
    return 'clone';
  }
  Interceptor.flush();
  const extent = patchedExtent(fn, before);
  if (extent > 5 && !noBranchInto(fn, extent, h.limit, h.size)) {
    Interceptor.revert(fn);
    Interceptor.flush();
    throw new Error('a branch inside it lands in the first ' + extent + ' bytes the Interceptor overwrites');
  }
  if (own !== 0 && nearJumpTo(fn, L.thunk) && extent <= own) return 'inline';
  // The redirect covers more than the relocated prologue: go through Frida's trampoline.
  jumpTail(tail, orig);
  setStubTarget(L.stub, orig);
  return 'trampoline';
}

// The jumps deferred by hookExport: written once the Interceptor has committed the detail stubs' listeners
// (no thread may reach a stub whose listener is still being written).
function finishPending(pending, m) {
  if (pending.length === 0) return;
  Interceptor.flush();
  const done = h => {
    hookCounts[h.how]++;
    hookedAddrs.set(h.fn.toString(), h.e.id);
  };
  if (world !== null) {
    for (const h of pending) {
      if (h.how !== 'far') {
        const b = [0xe9];
        le32(b, h.L.thunk.sub(h.fn.add(5)).toInt32());
        h.bytes = b;
      }
      h.original = new Uint8Array(h.fn.readByteArray(h.bytes.length));
    }
    const written = new Set(worldPatch(pending));
    for (const h of pending) {
      if (written.has(h)) {
        if (h.how !== 'far') rememberPatch(h.fn, h.original);
        directPatches.push([h.fn, h.original]);
        done(h);
      } else {
        skipped.push([m.name, h.e.fn, 'busy: a thread kept running its first bytes']);
        h.e.dead = true;
      }
    }
    return;
  }
  for (const h of pending) {
    try {
      if (patchJump(h.fn, h.L.thunk, true)) h.how = 'inline';
      else h.how = hookWithInterceptor(h);
    } catch (err) {
      skipped.push([m.name, h.e.fn, String(err.message || err)]);
      h.e.dead = true;
      continue;
    }
    done(h);
  }
}

// A thunk out of branch range: the prologue gets `jmp [rip+0]; dq thunk` (14 bytes), so at least 14 bytes of it
// must relocate with no branch into them. Written with the world stopped in a running program (never by halves),
// plainly when the library has just been loaded or the program has not started. Far patches are not in the
// fork handler's table (it restores 5 bytes): a forked child keeps the jump into the parent's thunk, which stays
// mapped, and its calls through it count in the parent's counters.
function farJump(thunk) {
  const b = [0xff, 0x25, 0, 0, 0, 0];
  le64(b, thunk);
  return b;
}

function hookFar(fn, code, e, pending, limit, size) {
  const { L, tail, own } = buildThunk(fn, code, e);
  if (own < 14 || !noBranchInto(fn, 14, limit, size)) throw new Error('no memory within branch range, prologue too short for a far jump');
  writeStub(L.stub, e, tail);
  const h = { fn, L, e, tail, own, how: 'far', bytes: farJump(L.thunk) };
  if (!lateScan && livePatching) {
    if (world === null) throw new Error('no memory within branch range, and no stopped world to write a far jump');
    pending.push(h);
    return 'pending';
  }
  const original = new Uint8Array(fn.readByteArray(14));
  Memory.patchCode(fn, 14, c => writeBytes(c, h.bytes));
  directPatches.push([fn, original]);
  return 'far';
}

// ---------------------------------------------------------------------------------------------------------
// Hooking a module

function canonical(names) {
  return names.slice().sort((a, b) => (a.length - b.length) || (a < b ? -1 : a > b ? 1 : 0))[0];
}

function resolveIfuncs(m, symbols) {
  // An IFUNC export's symbol points at its resolver; dlsym returns the implementation the loader chose.
  const out = [];
  if (Process.platform !== 'linux') return out;
  const unknown = symbols.filter(s => s.isGlobal && s.type === 'unknown' && exportPattern.test(s.name));
  if (unknown.length === 0) return out;
  // 'exclusive': keep the JavaScript lock, so no other hook runs while the scan is half done.
  const opts = { scheduling: 'exclusive' };
  const dlopen = new NativeFunction(Module.getGlobalExportByName('dlopen'), 'pointer', ['pointer', 'int'], opts);
  const dlsym = new NativeFunction(Module.getGlobalExportByName('dlsym'), 'pointer', ['pointer', 'pointer'], opts);
  const h = dlopen(Memory.allocUtf8String(m.path), 0x4 | 0x2 /* RTLD_NOLOAD|RTLD_NOW */);
  if (h.isNull()) return out;
  for (const s of unknown) {
    const impl = dlsym(h, Memory.allocUtf8String(s.name));
    if (!impl.isNull()) out.push({ name: s.name, address: impl, size: 16, ifunc: true });
  }
  return out;
}

function hookModule(m) {
  const symbols = m.enumerateSymbols();
  const sizes = new Map();
  const starts = [];
  for (const s of symbols) {
    if (s.type === 'function' || s.type === 'unknown') starts.push(s.address);
    if (s.size !== undefined && s.type === 'function') sizes.set(s.address.toString(), s.size);
  }
  starts.sort((a, b) => a.compare(b));
  const funcs = m.enumerateExports().filter(e => e.type === 'function' && exportPattern.test(e.name));
  for (const f of resolveIfuncs(m, symbols)) funcs.push(f);
  // Two names, one address: hook once, under the canonical name.
  const byAddr = new Map();
  for (const f of funcs) {
    const k = f.address.toString();
    if (!byAddr.has(k)) byAddr.set(k, { address: f.address, names: [] });
    byAddr.get(k).names.push(f.name);
  }
  const groups = [];
  for (const g of byAddr.values()) {
    const name = canonical(g.names);
    if (hookedAddrs.has(g.address.toString())) continue; // already hooked (a forwarder or a second load)
    if (cfg.specials.indexOf(name) >= 0 || g.names.some(n => cfg.specials.indexOf(n) >= 0)) {
      try {
        hookSpecial(m, g.address, name, g.names);
      } catch (err) {
        skipped.push([m.name, name, String(err.message || err)]); // the module's other exports are still hooked
        const last = entries[entries.length - 1];
        if (last !== undefined && last.fn === name) last.dead = true;
        hookedAddrs.delete(g.address.toString());
      }
      continue;
    }
    const size = sizes.get(g.address.toString());
    // Another symbol inside the 5 bytes the jump overwrites (functions packed together): leave it alone.
    const next = nextStart(starts, g.address);
    if (next !== null && next.sub(g.address).toInt32() < 5) {
      skipped.push([m.name, name, 'too short to hook (' + next.sub(g.address).toInt32() + ' bytes before the next function)']);
      continue;
    }
    groups.push({ address: g.address, name, names: g.names });
  }
  if (groups.length === 0) return;
  if (!IS_X64) {
    for (const g of groups) {
      const e = newEntry(m.name, m.path, g.name, g.names);
      e.detail = newDetail(e.id);
      try {
        Interceptor.attach(g.address, cm, e.detail);
        if (cfg.events) attachEvents(g.address, e);
        e.counterIsDetail = true;
        hookedAddrs.set(g.address.toString(), e.id);
      } catch (err) {
        skipped.push([m.name, g.name, String(err.message || err)]);
      }
    }
    return;
  }
  const per = BLOCK_SIZE;
  const codeSize = Math.ceil((groups.length * per) / PAGE) * PAGE;
  const maxDistance = Math.max(0x10000000, 0x70000000 - m.size);
  const code = nearMap(codeSize, m, maxDistance);
  const far = code.far === true;
  let i = 0;
  const pending = [];
  const codeRanges = []; // filled as met (a module's own range list goes by the path it was loaded by)
  for (const g of groups) {
    const e = newEntry(m.name, m.path, g.name, g.names);
    e.slot = allocCounter();
    e.detail = newDetail(e.id);
    const slot = code.add(i * per);
    i++;
    try {
      const limit = codeEnd(codeRanges, g.address);
      const size = sizes.get(g.address.toString());
      const how = far ? hookFar(g.address, slot, e, pending, limit, size)
        : hookExport(g.address, slot, e, nextStart(starts, g.address), pending, limit, size);
      if (how === 'pending') continue;
      hookCounts[how]++;
      hookedAddrs.set(g.address.toString(), e.id);
    } catch (err) {
      skipped.push([m.name, g.name, String(err.message || err)]);
      e.dead = true;
    }
  }
  finishPending(pending, m);
}

const PADDING = new Set(['nop', 'int3']);

// Copy a short function (up to its first `ret` or tail `jmp`, no branch back into its first 5 bytes) into `clone`
// (X86Relocator fixes rip-relative operands, calls and branches); the caller then overwrites its first 5 bytes
// with a jump to the thunk (patchJump). Those 5 bytes must be the function itself or padding after it (never a
// neighbour's code). False when that is not safe.
function buildClone(fn, clone, next) {
  if (!IS_X64) return false;
  let p = fn, ret = false;
  const head = fn.add(5);
  while (p.sub(fn).toInt32() < 48) {
    const ins = Instruction.parse(p);
    const mn = ins.mnemonic;
    if (mn === 'ret') { p = ins.next; ret = true; break; }
    if (mn.startsWith('loop') || mn.startsWith('ret') || mn === 'syscall') return false;
    if (mn.startsWith('j') || mn === 'call') {
      // A branch is fine unless it lands in the 5 bytes the jump to the thunk overwrites.
      const op = ins.operands[0];
      if (op === undefined || op.type !== 'imm') return false;
      const target = ptr(op.value.toString());
      if (target.compare(fn) >= 0 && target.compare(head) < 0) return false;
      if (mn === 'jmp') { p = ins.next; ret = true; break; } // a tail call ends the function too
    }
    p = ins.next;
  }
  if (!ret) return false;
  while (p.sub(fn).toInt32() < 5) {
    if (next !== null && p.compare(next) >= 0) return false;
    const ins = Instruction.parse(p);
    if (!PADDING.has(ins.mnemonic)) return false;
    p = ins.next;
  }
  if (next !== null && next.sub(fn).toInt32() < 5) return false;
  const w = new X86Writer(clone, { pc: clone });
  const r = new X86Relocator(fn, w);
  while (r.readOne() !== 0) {
    if (r.eoi) break;
  }
  r.writeAll();
  w.flush();
  w.dispose();
  r.dispose();
  return true;
}

const directPatches = []; // [address, original first 5 bytes] of functions patched without the Interceptor

// Writing a 5-byte jump over a prologue other threads may be running: two separate stores (opcode, then
// displacement) can be seen half done, a wild jump. The 5 bytes go in with one aligned 8-byte store, or one
// lock cmpxchg16b when they straddle 8 bytes inside an aligned 16; `live` false (a library dlopen has not returned
// yet) allows a plain write otherwise. Linux x86-64 (SysV calls); elsewhere Memory.patchCode.
let atomics = null; // {copy8, cas16, scratch}

function atomicWriters() {
  if (atomics !== null || Process.platform !== 'linux' || !IS_X64) return atomics;
  const code = lastingAlloc(PAGE);
  const copy8 = [0x48, 0x8b, 0x06, 0x48, 0x89, 0x07, 0xc3]; // mov rax, [rsi]; mov [rdi], rax; ret
  const cas16 = [0x53, 0x49, 0x89, 0xd0, 0x48, 0x8b, 0x06, 0x48, 0x8b, 0x56, 0x08, 0x49, 0x8b, 0x18, 0x49, 0x8b,
    0x48, 0x08, 0xf0, 0x48, 0x0f, 0xc7, 0x0f, 0x0f, 0x94, 0xc0, 0x0f, 0xb6, 0xc0, 0x5b, 0xc3];
  // push rbx; mov r8, rdx; mov rax, [rsi]; mov rdx, [rsi+8]; mov rbx, [r8]; mov rcx, [r8+8];
  // lock cmpxchg16b [rdi]; sete al; movzx eax, al; pop rbx; ret
  writeBytes(code, copy8);
  writeBytes(code.add(16), cas16);
  atomics = {
    copy8: new NativeFunction(code, 'void', ['pointer', 'pointer']),
    cas16: new NativeFunction(code.add(16), 'int', ['pointer', 'pointer', 'pointer']),
    scratch: code.add(256),
  };
  return atomics;
}

function atomicallyPatchable(fn) {
  const addr = parseInt(fn.toString(16), 16);
  return atomicWriters() !== null && (addr % 8 <= 3 || addr % 16 <= 11);
}

function writeJump5(fn, bytes, live) {
  if (atomicallyPatchable(fn)) {
    const w = atomicWriters();
    const addr = parseInt(fn.toString(16), 16);
    const wide = addr % 8 <= 3 ? 8 : 16; // the aligned word (or 16 bytes) holding all 5
    const off = addr % wide, base = fn.sub(off);
    const first = base.and(ptr(-PAGE)), span = base.add(wide - 1).and(ptr(-PAGE)).sub(first).toInt32() + PAGE;
    Memory.protect(first, span, 'rwx'); // only the page(s) written: the next one may be the library's data
    try {
      for (let tries = 0; tries < 100; tries++) {
        const old = new Uint8Array(base.readByteArray(wide));
        const want = old.slice();
        for (let i = 0; i < 5; i++) want[off + i] = bytes[i];
        w.scratch.writeByteArray(old.buffer);
        w.scratch.add(16).writeByteArray(want.buffer);
        if (wide === 8) { w.copy8(base, w.scratch.add(16)); return true; }
        if (w.cas16(base, w.scratch, w.scratch.add(16)) === 1) return true;
      }
      return false;
    } finally {
      Memory.protect(first, span, 'r-x');
    }
  }
  if (live) return false;
  Memory.patchCode(fn, 5, code => writeBytes(code, bytes));
  return true;
}

// Stopping the world to patch a running program (world.c says why). The signal handler is machine code in memory
// that is never freed: a thread that had the signal blocked may take it after the script is gone.
let world = null; // {state, sig, patch}
const patching = { stops: 0, threads: 0, unknown: 0, written: 0 }; // reported with the hooks

function setupWorld() {
  if (!IS_X64 || Process.platform !== 'linux' || !cfg.worldSource) return null;
  const sigactionPtr = Module.findGlobalExportByName('sigaction');
  if (sigactionPtr === null) return null;
  const sigaction = new NativeFunction(sigactionPtr, 'int', ['int', 'pointer', 'pointer']);
  const state = lastingAlloc(24 + 8 * 1024);
  const handler = lastingAlloc(PAGE);
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
  writeBytes(handler, h);
  const act = Memory.alloc(152), old = Memory.alloc(152); // glibc's struct sigaction
  // A real-time signal nobody handles (SIG_DFL): from SIGRTMAX-2 down.
  for (let sig = 62; sig >= 40; sig--) {
    if (sigaction(sig, NULL, old) !== 0 || !old.readPointer().isNull()) continue;
    act.writeByteArray(new ArrayBuffer(152));
    act.writePointer(handler);
    act.add(136).writeS32(0x4 | 0x10000000 | 0x08000000); // SA_SIGINFO | SA_RESTART | SA_ONSTACK
    if (sigaction(sig, act, NULL) !== 0) continue;
    const syms = {};
    for (const n of ['syscall', 'opendir', 'readdir', 'closedir', 'mprotect', 'clock_gettime']) {
      const a = Module.findGlobalExportByName(n);
      if (a === null) return null;
      syms[n] = a;
    }
    let mod;
    try {
      mod = new CModule(cfg.worldSource, syms);
    } catch (_) {
      return null; // no stopped world: jumps in a running program are written with one atomic store
    }
    keep.push(mod);
    const patch = new NativeFunction(mod.cudatrace_patch_stopped, 'int',
      ['pointer', 'int', 'pointer', 'int', 'int', 'int'], { scheduling: 'exclusive' });
    return { state, sig, patch };
  }
  return null;
}

// Write each item's bytes (a 5-byte or a 14-byte jump, or the original bytes) at its fn with the other threads
// stopped; retried while a thread sits inside them.
// Returns the items written.
function worldPatch(items) {
  const written = [];
  let todo = items.slice().sort((a, b) => a.fn.compare(b.fn));
  for (let round = 0; round < 30 && todo.length > 0; round++) {
    if (round > 0) Thread.sleep(0.001 * Math.min(round, 20));
    const buf = Memory.alloc(32 * todo.length); // CtPatch: fn, 16 bytes, length, done
    todo.forEach((it, i) => {
      buf.add(32 * i).writePointer(it.fn);
      writeBytes(buf.add(32 * i + 8), it.bytes);
      buf.add(32 * i + 24).writeS32(it.bytes.length);
    });
    world.patch(world.state, world.sig, buf, todo.length, 300, PAGE);
    patching.stops++;
    patching.threads = Math.max(patching.threads, world.state.readU32());
    patching.unknown = Math.max(patching.unknown, world.state.add(16).readU32());
    const again = [];
    todo.forEach((it, i) => (buf.add(32 * i + 28).readS32() === 1 ? written : again).push(it));
    todo = again;
  }
  patching.written += written.length;
  return written;
}

// Jump from fn to its thunk; false when that cannot be written safely while the program runs.
function patchJump(fn, thunk, live) {
  const original = new Uint8Array(fn.readByteArray(5));
  const rel = thunk.sub(fn.add(5)).toInt32();
  const b = [0xe9];
  le32(b, rel);
  rememberPatch(fn);
  if (!writeJump5(fn, b, live)) { forgetLastPatch(fn); return false; }
  directPatches.push([fn, original]);
  return true;
}

// The end of the executable memory holding addr (undefined when it is not executable), with the ranges met so
// far (a module's exports mostly lie in one).
function codeEnd(ranges, addr) {
  for (const r of ranges) if (addr.compare(r.base) >= 0 && addr.compare(r.end) < 0) return r.end;
  const found = Process.findRangeByAddress(addr);
  if (found === null || found.protection.indexOf('x') < 0) return undefined;
  const r = { base: found.base, end: found.base.add(found.size) };
  ranges.push(r);
  return r.end;
}

function nextStart(starts, addr) {
  let lo = 0, hi = starts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid].compare(addr) <= 0) lo = mid + 1; else hi = mid;
  }
  return lo < starts.length ? starts[lo] : null;
}

// cuGetProcAddress(_v2) and cuGetExportTable: a few hundred calls at start-up, hooked in JavaScript because
// they need their arguments after the call.
function jsCounts(e) {
  if (e.js === null) e.js = { calls: 0, first: 0, time: 0, statuses: new Map(), callers: new Map() };
  return e.js;
}

function countJs(e, t0, status, ret) {
  const j = jsCounts(e);
  j.calls++;
  if (j.first === 0) j.first = t0;
  j.time += Number(nowNs() - t0);
  if (status !== 0) j.statuses.set(status, (j.statuses.get(status) || 0) + 1);
  const who = callerName(ret);
  j.callers.set(who, (j.callers.get(who) || 0) + 1);
}

const pendingSpecials = []; // [address, first bytes before hooking] of special hooks made in a late scan

function committedNot(p) {
  const now = new Uint8Array(p[0].readByteArray(5));
  for (let i = 0; i < 5; i++) if (now[i] !== p[1][i]) return false;
  return true;
}

function hookSpecial(m, address, name, names) {
  if (lateScan) pendingSpecials.push([address, new Uint8Array(address.readByteArray(5))]);
  const e = newEntry(m.name, m.path, name, names);
  hookedAddrs.set(address.toString(), e.id);
  if (name.startsWith('cuGetProcAddress')) {
    const v2 = name === 'cuGetProcAddress_v2';
    Interceptor.attach(address, {
      onEnter(args) {
        this.t0 = nowNs();
        this.sym = args[0].isNull() ? '' : args[0].readCString();
        this.pfn = args[1];
        this.version = args[2].toInt32();
        this.flags = args[3].toString();
      },
      onLeave(retval) {
        const status = retval.toInt32();
        let p = NULL;
        try { if (!this.pfn.isNull()) p = this.pfn.readPointer(); } catch (_) { p = NULL; }
        const found = status === 0 && !p.isNull();
        const key = [this.sym, this.version, this.flags, found, name].join('|');
        const l = lookups.get(key);
        if (l) l.count++;
        else lookups.set(key, { symbol: this.sym, version: this.version, flags: this.flags, found, count: 1, via: name });
        if (found) {
          const t = thunkForPointer(p, this.sym);
          if (t !== null) {
            this.pfn.writePointer(t);
            // The detail listener on a new thunk's stub is committed when this thread leaves JavaScript:
            // wait for it (at most 50 ms) so the first calls through the pointer record their details too.
            for (let i = 0; i < 50 && pendingSpecials.some(committedNot); i++) Thread.sleep(0.001);
            pendingSpecials.length = 0;
          }
        }
        countJs(e, this.t0, status, this.returnAddress);
      }
    });
  } else if (name === 'cuGetExportTable') {
    Interceptor.attach(address, {
      onEnter(args) {
        this.t0 = nowNs();
        let uuid = null;
        try {
          const b = new Uint8Array(args[1].readByteArray(16));
          const h = Array.from(b, x => ('0' + x.toString(16)).slice(-2)).join('');
          uuid = (h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' +
            h.slice(20)).toUpperCase();
        } catch (_) { uuid = null; }
        this.uuid = uuid;
      },
      onLeave(retval) {
        const status = retval.toInt32();
        if (this.uuid !== null) {
          let t = exportTables.get(this.uuid);
          if (!t) { t = { uuid: this.uuid, count: 0, statuses: {} }; exportTables.set(this.uuid, t); }
          t.count++;
          t.statuses[status] = (t.statuses[status] || 0) + 1;
        }
        countJs(e, this.t0, status, this.returnAddress);
      }
    });
  } else {
    throw new Error('no special hook for ' + name);
  }
}

// A pointer handed out by cuGetProcAddress that is no hooked export (under ZLUDA or a newer driver it may be
// an internal function): give the caller a counting thunk instead.
function thunkForPointer(p, symbol) {
  const k = p.toString();
  if (hookedAddrs.has(k)) return null; // an export we already count
  const known = procThunks.get(k);
  if (known !== undefined) return known;
  if (!IS_X64) return null;
  const per = BLOCK_SIZE;
  if (pool === null || pool.used === pool.cap) {
    const cap = 256;
    // Callers keep these pointers, also in a forked child: memory that Frida does not free there.
    let base = ownMap(cap * per);
    if (base === null) { base = Memory.alloc(cap * per); keep.push(base); Memory.protect(base, cap * per, 'rwx'); }
    pool = { base, used: 0, cap };
  }
  const mod = Process.findModuleByAddress(p);
  const e = newEntry(mod ? mod.name : '[anonymous]', mod ? mod.path : '', symbol, [symbol]);
  e.slot = allocCounter();
  e.detail = newDetail(e.id);
  e.viaProc = true;
  const slot = pool.base.add(pool.used * per);
  pool.used++;
  writeThunk(slot, e, p);
  if (cfg.detailCalls !== 0 && dispatch === null) {
    const stub = blockAt(slot).stub;
    pendingSpecials.push([stub, new Uint8Array(stubBytes(p, e).slice(0, 5))]);
  }
  procThunks.set(k, slot);
  sendHooks(e.id);
  return slot;
}

function attachEvents(target, e) {
  Interceptor.attach(target, {
    onEnter(args) {
      this.t0 = nowNs();
      this.a = [args[0], args[1], args[2], args[3], args[4], args[5]].map(x => x.toString());
    },
    onLeave(retval) {
      if (events.length >= 100000) { eventsDropped++; return; }
      events.push([this.t0.toString(), this.threadId, e.id, this.a, retval.toInt32()]);
    }
  });
}

// ---------------------------------------------------------------------------------------------------------
// Modules

function isCuda(name) {
  for (const p of libPatterns) if (p.test(name)) return true;
  return false;
}

function baseName(path) {
  return path.split(/[\\/]/).pop();
}

const hookTimes = {}; // module name -> [milliseconds spent hooking it, entry points hooked]

// Hook every CUDA library loaded since the last scan. `loaded` is the name a dlopen/LoadLibrary just loaded:
// when the module list does not show it yet, it is looked up by name so its hooks are in before the call returns.
function scanModules(loaded) {
  const me = Process.getCurrentThreadId();
  if (scanning === me) return; // re-entered from a load the scan itself made
  // Another thread is mid-scan (it let go of the JavaScript lock in a native call): wait for it, so this
  // thread never runs on into a library whose hooks are not in yet.
  while (scanning !== 0) Thread.sleep(0.001);
  scanning = me;
  try {
    const added = [];
    const mods = Process.enumerateModules();
    if (loaded && isCuda(baseName(loaded)) && !seenNames.has(baseName(loaded))) {
      const m = Process.findModuleByName(baseName(loaded)) || (loaded.indexOf('/') >= 0 ? Module.load(loaded) : null);
      if (m !== null) mods.push(m);
    }
    for (const m of mods) {
      if (seenModules.has(m.path)) continue;
      seenModules.set(m.path, true);
      seenNames.add(m.name);
      if (!isCuda(m.name)) continue;
      const before = entries.length, t0 = Date.now();
      try {
        hookModule(m);
      } catch (err) {
        skipped.push([m.name, '*', String(err.message || err)]);
      }
      hookTimes[m.name] = [Date.now() - t0, entries.length - before]; // start-up cost, said in the trace's notes
      added.push({ name: m.name, path: m.path, base: m.base.toString(), size: m.size });
      sendHooks(before);
    }
    if (added.length > 0) send({ type: M.modules, pid: Process.id, modules: added });
  } finally {
    scanning = 0;
  }
}

function sendHooks(from) {
  const rows = [];
  for (let i = from; i < entries.length; i++) {
    const e = entries[i];
    if (e.dead) continue; // left alone: named in `skipped`
    rows.push([e.id, e.module, e.path, e.fn, e.aliases, e.slot, e.viaProc === true]);
  }
  if (rows.length > 0 || skipped.length > 0) {
    send({ type: M.hooks, pid: Process.id, entries: rows, skipped: skipped.splice(0), methods: hookCounts, patching,
      timing: hookTimes });
  }
}

// A program may close every descriptor it did not open itself before it execs a child: Python's subprocess
// (close_fds, the default), closefrom(), daemons. Frida's own connection to the host goes with them; its threads
// then spin on a dead descriptor and the child waits for ever at exec for a host that no longer hears it. So
// close_range() and closefrom() leave the descriptors Frida cloaks (its own) open and close the rest.
function guardAgentDescriptors() {
  if (Process.platform !== 'linux') return;
  const cr = Module.findGlobalExportByName('close_range');
  const getrlimit = Module.findGlobalExportByName('getrlimit');
  if (cr === null) return; // glibc older than 2.34: nothing to guard through these names
  const closeRange = new NativeFunction(cr, 'int', ['uint', 'uint', 'int']);
  const lim = Memory.alloc(16);
  const limitOf = () => {
    // Descriptors above the soft limit are rare (opened before it was lowered): look no further, bounded.
    let n = 1 << 20;
    if (getrlimit !== null && new NativeFunction(getrlimit, 'int', ['int', 'pointer'])(7 /* RLIMIT_NOFILE */, lim) === 0) {
      n = Math.min(n, Number(lim.readU64()));
    }
    return n;
  };
  const closeAround = (first, last, flags) => {
    const hi = Math.min(last, limitOf() - 1);
    let from = first, rc = 0;
    for (let fd = first; fd <= hi; fd++) {
      if (!Cloak.hasFileDescriptor(fd)) continue;
      if (fd > from) rc |= closeRange(from, fd - 1, flags);
      from = fd + 1;
    }
    if (from <= last) rc |= closeRange(from, last, flags);
    return rc === 0 ? 0 : -1;
  };
  const guard = (name, fn) => {
    try {
      fn();
    } catch (err) {
      // e.g. attached late with no memory free near libc: a subprocess that closes every descriptor may then hang
      skipped.push(['libc', name, 'not guarded: ' + String(err.message || err)]);
    }
  };
  guard('close_range', () => Interceptor.replace(cr, new NativeCallback(
    (first, last, flags) => closeAround(first >>> 0, last >>> 0, flags), 'int', ['uint', 'uint', 'int'])));
  const cf = Module.findGlobalExportByName('closefrom');
  if (cf !== null) {
    guard('closefrom', () => Interceptor.replace(cf, new NativeCallback(
      low => { closeAround(Math.max(low, 0), 0xffffffff, 0); }, 'void', ['int'])));
  }
}

// Libraries a dlopen could not load, with the loader's message (Linux). Reading dlerror() clears it for the
// program, so the agent asks the loader once more with the same name and flags, which fails the same way and puts
// the same message back for the program's own dlerror() (a failed load runs none of the library's code). Fatal errors at start-up or from lazy
// binding ("symbol lookup error", exit status 127) never reach here: the host asks the loader afterwards.
const loaderErrors = new Map(); // requested name + message -> {requested, message, count, t}
let dlerrorFn = null, dlopenFn = null, rearming = false;

function noteFailedLoad(name, flags) {
  if (dlerrorFn === null) {
    const e = Module.findGlobalExportByName('dlerror'), o = Module.findGlobalExportByName('dlopen');
    if (e === null || o === null) return;
    dlerrorFn = new NativeFunction(e, 'pointer', []);
    dlopenFn = new NativeFunction(o, 'pointer', ['pointer', 'int']);
  }
  // Frida's own module tracking may have made a dl* call since (which clears the message): ask again first.
  const again = () => {
    rearming = true;
    try { dlopenFn(Memory.allocUtf8String(name), flags); } finally { rearming = false; }
  };
  let m = dlerrorFn();
  if (m.isNull()) { again(); m = dlerrorFn(); }
  const message = m.isNull() ? '' : m.readUtf8String();
  again();
  const key = name + '\u0000' + message;
  let r = loaderErrors.get(key);
  if (r === undefined) {
    if (loaderErrors.size >= 256) return;
    r = { requested: name, message, count: 0, t: nowNs().toString() };
    loaderErrors.set(key, r);
  }
  r.count++;
}

// The periodic batch is asked for by the host (a message every flushMs), not a timer of the agent's: in a forked
// child the parent's script is still there for a while, and a timer of it firing there crashed children (with a
// 20 ms timer 50 of 150 children forked at once died of SIGSEGV). No message reaches the parent's script in a
// child, so none of its JavaScript runs there on its own.
function listenForFlushes() {
  recv(M.flush, () => {
    if (!exiting) flush(false, null);
    listenForFlushes();
  });
}

// dlopen finds a bare name through the calling library's RPATH or RUNPATH ($ORIGIN: the caller's own folder).
// glibc learns the caller from dlopen's return address, and the Interceptor's listener (it needs the return, to
// hook the library before dlopen returns) hands dlopen an address of Frida's, so glibc searched the program's paths
// instead: a library loading a sibling by name (libnvrtc its libnvrtc-builtins, cuDNN its sub-libraries) failed
// under the tracer only. The agent looks where the caller's paths would, in the loader's order, and passes the
// file it finds there; null when the loader would find the same without the caller (or nothing).
let accessFn = null;
function callerPath(name, caller) {
  if (name === null || name.indexOf('/') >= 0 || Process.platform !== 'linux') return null;
  if (Process.findModuleByName(name) !== null) return null; // loaded already: dlopen takes it by name
  const m = Process.findModuleByAddress(caller);
  if (m === null || m.path === Process.mainModule.path) return null; // the program's own paths: searched anyway
  const paths = searchPaths(m);
  if (paths === null) return null;
  if (accessFn === null) accessFn = new NativeFunction(Module.getGlobalExportByName('access'), 'int', ['pointer', 'int']);
  const exists = dir => dir !== '' && accessFn(Memory.allocUtf8String(dir + '/' + name), 0 /* F_OK */) === 0;
  const origin = m.path.substring(0, m.path.lastIndexOf('/'));
  const expand = list => list.split(':').map(d => d.replace(/\$\{ORIGIN\}|\$ORIGIN/g, origin)).filter(d => d.indexOf('$') < 0);
  if (paths.rpath !== null && paths.runpath === null) {
    for (const d of expand(paths.rpath)) if (exists(d)) return d + '/' + name; // before LD_LIBRARY_PATH
    return null;
  }
  if (paths.runpath === null) return null;
  const env = getenv('LD_LIBRARY_PATH');
  if (env !== null) for (const d of env.split(/[:;]/)) if (exists(d)) return null; // found there first anyway
  for (const d of expand(paths.runpath)) if (exists(d)) return d + '/' + name;
  return null;
}

let getenvFn = null;
function getenv(name) {
  if (getenvFn === null) getenvFn = new NativeFunction(Module.getGlobalExportByName('getenv'), 'pointer', ['pointer']);
  const v = getenvFn(Memory.allocUtf8String(name));
  return v.isNull() ? null : v.readUtf8String();
}

// DT_RPATH and DT_RUNPATH of a loaded ELF module, read from its dynamic section in memory.
function searchPaths(m) {
  const b = m.base;
  if (b.readU32() !== 0x464c457f || b.add(4).readU8() !== 2) return null; // ELF64 only
  const phoff = b.add(0x20).readU64().toNumber(), phentsize = b.add(0x36).readU16(), phnum = b.add(0x38).readU16();
  let dyn = null, low = null;
  for (let i = 0; i < phnum && i < 64; i++) {
    const ph = b.add(phoff + i * phentsize);
    const type = ph.readU32(), vaddr = ph.add(0x10).readU64().toNumber();
    if (type === 1 && (low === null || vaddr < low)) low = vaddr; // PT_LOAD
    if (type === 2) dyn = vaddr; // PT_DYNAMIC
  }
  if (dyn === null || low === null) return null;
  const bias = b.sub(low - (low % 0x1000));
  let strtab = null, rpath = null, runpath = null;
  for (let d = bias.add(dyn), i = 0; i < 4096; i++, d = d.add(16)) {
    const tag = d.readS64().toNumber(), val = d.add(8).readU64();
    if (tag === 0) break;
    if (tag === 5) strtab = val; // DT_STRTAB: glibc makes it absolute in place; relative when it has not
    else if (tag === 15) rpath = val.toNumber();
    else if (tag === 29) runpath = val.toNumber();
  }
  if (strtab === null || (rpath === null && runpath === null)) return null;
  const str = ptr(strtab.toString()).compare(b) < 0 ? bias.add(strtab.toString()) : ptr(strtab.toString());
  return {
    rpath: rpath === null ? null : str.add(rpath).readUtf8String(),
    runpath: runpath === null ? null : str.add(runpath).readUtf8String(),
  };
}

function watchLoads() {
  // Hooks go in when dlopen returns: the library is then relocated and initialized.
  const wide = new Set(['LoadLibraryExW', 'LoadLibraryW']);
  const names = Process.platform === 'windows'
    ? ['LoadLibraryExW', 'LoadLibraryExA', 'LoadLibraryW', 'LoadLibraryA']
    : ['dlopen', 'dlmopen', 'android_dlopen_ext'];
  for (const n of names) {
    const p = Module.findGlobalExportByName(n);
    if (p === null) continue;
    const nameArg = n === 'dlmopen' ? 1 : 0;
    try {
      Interceptor.attach(p, {
        onEnter(args) {
          if (rearming) return;
          loading++;
          const a = args[nameArg];
          this.name = a.isNull() ? null : (wide.has(n) ? a.readUtf16String() : a.readUtf8String());
          this.flags = n === 'dlopen' ? args[1].toInt32() : null;
          if (n === 'dlopen' || n === 'dlmopen') {
            let found = null;
            try { found = callerPath(this.name, this.returnAddress); } catch (_) { /* the program's own name stands */ }
            if (found !== null) {
              this.path = Memory.allocUtf8String(found); // kept alive by the invocation until onLeave
              args[nameArg] = this.path;
            }
          }
        },
        onLeave(retval) {
          if (rearming) return;
          loading--;
          if (retval.isNull()) {
            if (this.flags !== null && this.name !== null) {
              try { noteFailedLoad(this.name, this.flags); } catch (_) { /* the program's dlopen result stands */ }
            }
            return;
          }
          // Interceptor changes made inside this callback are committed only later, so the scan patches the
          // library's prologues itself (lateScan) and they take effect before dlopen returns.
          lateScan = true;
          try { scanModules(this.name); } finally { lateScan = false; }
          // cuGetProcAddress and cuGetExportTable are still hooked through the Interceptor: give it up to 50 ms
          // (Thread.sleep leaves the JavaScript runtime, which is when pending changes are flushed).
          for (let i = 0; i < 50 && pendingSpecials.some(committedNot); i++) Thread.sleep(0.001);
          pendingSpecials.length = 0;
        },
      });
    } catch (_) { /* another name for the same code */ }
  }
  // The exit code, and the last batch (an rpc.exports.dispose would do this too, but a script that has one
  // stops Frida's child gating from reporting forks).
  const exits = Process.platform === 'windows' ? ['ExitProcess', 'TerminateProcess'] : ['exit', '_exit', '_Exit'];
  const exitAddrs = new Set();
  for (const n of exits) {
    const p = Module.findGlobalExportByName(n);
    if (p === null || exitAddrs.has(p.toString())) continue;
    exitAddrs.add(p.toString());
    const isTerminate = n === 'TerminateProcess';
    Interceptor.attach(p, {
      onEnter(args) {
        if (isTerminate && !args[0].equals(ptr(-1))) return; // another process
        if (exiting) return;
        exiting = true;
        const code = (isTerminate ? args[1] : args[0]).toInt32();
        flush(true, 'exit ' + code, code);
        awaitAck(2);
      }
    });
  }
  // Modules loaded by other means (a loader of its own, a DT_NEEDED of a dlopen'd library seen here first):
  // the observer only schedules a scan, since installing hooks inside its callback crashed targets, and that
  // scan waits while a dlopen is under way (the library may not be relocated yet; dlopen's onLeave scans).
  Process.attachModuleObserver({
    onAdded(_m) { setTimeout(() => { if (loading === 0) scanModules(); }, 0); },
    onRemoved(m) { forgetPatches(m); /* counts of unloaded libraries stay */ }
  });
}

// ---------------------------------------------------------------------------------------------------------
// Reporting

function callerName(addr) {
  const k = addr.toString();
  let n = callerNames.get(k);
  if (n === undefined) {
    const m = Process.findModuleByAddress(addr);
    n = m ? m.name : '[anonymous]';
    callerNames.set(k, n);
  }
  return n;
}

// Every counter's value: the sum of its rows (one row unless counting per CPU).
function readCounters() {
  if (counterUsed === 0) return null;
  const sums = new Array(counterUsed).fill(0);
  for (let r = 0; r < counterRows; r++) {
    const c32 = new Uint32Array(counters.add(r * counterCap * 8).readByteArray(counterUsed * 8));
    for (let i = 0; i < counterUsed; i++) sums[i] += c32[2 * i] + c32[2 * i + 1] * 4294967296;
  }
  return sums;
}

function detailRow(e, calls) {
  const d = e.detail;
  const statuses = [];
  const callers = new Map();
  let first = 0, time = 0;
  if (d !== null) {
    first = u64(d.add(D_FIRST));
    time = u64(d.add(D_TIME));
    const nCodes = Math.min(d.add(D_N_CODES).readS32(), N_STATUSES);
    for (let i = 0; i < nCodes; i++) {
      const code = d.add(D_CODES + 4 * i).readS32();
      if (code !== 0) statuses.push([code, u64(d.add(D_CODE_COUNTS + 8 * i))]);
    }
    const oc = u64(d.add(D_OTHER_CODES));
    if (oc > 0) statuses.push(['other', oc]);
    const nCallers = Math.min(d.add(D_N_CALLERS).readS32(), N_CALLERS);
    for (let i = 0; i < nCallers; i++) {
      const r = d.add(D_CALLERS + 8 * i).readPointer();
      if (r.isNull()) continue;
      const who = callerName(r);
      callers.set(who, (callers.get(who) || 0) + u64(d.add(D_CALLER_COUNTS + 8 * i)));
    }
    const ocl = u64(d.add(D_OTHER_CALLERS));
    if (ocl > 0) callers.set('[other]', (callers.get('[other]') || 0) + ocl);
  }
  if (e.js !== null) {
    first = e.js.first === 0 ? first : Number(e.js.first);
    time += e.js.time;
    for (const [c, n] of e.js.statuses) statuses.push([c, n]);
    for (const [w, n] of e.js.callers) callers.set(w, (callers.get(w) || 0) + n);
  }
  const detailCalls = d !== null ? u64(d.add(D_CALLS)) : (e.js ? e.js.calls : 0);
  return [e.id, calls, first.toString(), time, statuses, Array.from(callers.entries()), detailCalls];
}

// Hold the exiting (or crashing) thread until the host confirms the final batch, at most `seconds`.
// Thread.sleep lets the agent's JavaScript thread run meanwhile, which delivers the batch and the answer.
let acked = -1;
function awaitAck(seconds) {
  const want = seq - 1;
  for (let waited = 0; acked < want && waited < seconds; waited += 0.005) Thread.sleep(0.005);
}

function listenForAcks() {
  recv(M.ack, msg => {
    acked = Math.max(acked, msg.seq);
    listenForAcks();
  });
}

function flush(final, reason, exitCode, crash, ack) {
  const sums = readCounters();
  const rows = [];
  for (const e of entries) {
    let calls;
    if (e.js !== null) calls = e.js.calls;
    else if (e.counterIsDetail) calls = u64(e.detail.add(D_CALLS));
    else if (e.slot >= 0 && sums !== null) calls = sums[e.slot];
    else calls = 0;
    // Resend when the detail path moved too: its first-call time lands after the counter's increment.
    const stamp = calls + '/' + (e.detail !== null ? u64(e.detail.add(D_CALLS)) : 0);
    if (calls === 0 || stamp === lastSent[e.id]) continue;
    lastSent[e.id] = stamp;
    rows.push(detailRow(e, calls));
  }
  const msg = {
    type: M.counts, pid: Process.id, seq: seq++, final: final === true, reason: reason || null, rows,
    exitCode: exitCode === undefined ? null : exitCode, crash: crash === undefined ? null : crash,
    lookups: Array.from(lookups.values()), exportTables: Array.from(exportTables.values()),
    loaderErrors: Array.from(loaderErrors.values()), ack: ack === true,
  };
  send(msg);
  if (events.length > 0 || eventsDropped > 0) {
    send({ type: M.events, pid: Process.id, events: events.splice(0), dropped: eventsDropped });
    eventsDropped = 0;
  }
}

rpc.exports = {
  configure(config) {
    cfg = config;
    M = config.messages;
    libPatterns = config.libraryPatterns.map(p => new RegExp(p, 'i'));
    exportPattern = new RegExp(config.exportPattern);
    const symbols = {};
    const cg = Module.findGlobalExportByName('clock_gettime');
    if (cg !== null) symbols.clock_gettime = cg;
    cm = new CModule(config.detailSource, symbols);
    readDetailLayout(cm.cudatrace_detail_layout);
    const nowFn = new NativeFunction(cm.cudatrace_now_ns, 'uint64', []);
    nowNs = () => nowFn().toNumber();
    counterCap = config.counterCapacity;
    rseq = setupPerCpu();
    counterRows = rseq !== null ? rseq.cpus + 1 : 1;
    if (config.sharedCounters !== null && Process.platform === 'linux') {
      counters = openSharedCounters(config.sharedCounters, counterCap);
      if (counters !== null) shmPath = config.sharedCounters;
    }
    if (counters === null) counters = lastingAlloc(counterRows * counterCap * 8);
    Process.setExceptionHandler(details => {
      try {
        flush(true, 'crash: ' + details.type, null, details.type);
        awaitAck(2); // the batch must leave before the default handler ends us
      } catch (_) { /* the process is going down anyway */ }
      return false;
    });
    listenForAcks();
    installForkRestore();
    guardAgentDescriptors();
    world = setupWorld();
    dispatch = setupDispatch();
    livePatching = config.attached === true; // a spawned program is still suspended during the first scan
    scanModules();
    livePatching = true;
    watchLoads();
    listenForFlushes();
    return {
      pid: Process.id, arch: Process.arch, platform: Process.platform, nowNs: nowNs().toString(),
      sharedCounters: shmPath, fastPath: IS_X64,
      counterMode: !IS_X64 ? 'listener' : (rseq !== null ? 'per-cpu' : (cfg.counters === 'plain' ? 'plain' : 'locked')),
      counterRows, counterCapacity: counterCap,
    };
  },
  flush() {
    flush(false, 'requested');
    return true;
  },
  // Before the host detaches and leaves the process running: put back the prologues the agent patched itself
  // (Frida reverts its own hooks when the script unloads). Threads still inside a thunk finish through it: the
  // thunks, their counters and detail records stay mapped.
  release() {
    if (flushTimer !== null) { clearInterval(flushTimer); flushTimer = null; }
    // No thread takes a detail stub any more: Frida reverts their listeners when the script unloads.
    for (const e of entries) if (e.detail !== null && e.slot >= 0) e.detail.add(D_CALLS).writeU64(uint64('0x4000000000000000'));
    if (restoreTable !== null) restoreTable.writeU64(0);
    // A thread can be at a jump but never inside one: putting the original bytes back needs no stopped world,
    // only a store no thread sees half done.
    const patches = directPatches.splice(0).filter(([fn]) => Process.findModuleByAddress(fn) !== null);
    if (world !== null) return patches.length - worldPatch(patches.map(([fn, bytes]) => ({ fn, bytes }))).length;
    let left = 0;
    for (const [fn, bytes] of patches) if (bytes.length !== 5 || !writeJump5(fn, bytes, true)) left++;
    return left;
  },
};
