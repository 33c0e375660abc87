// Hooking one entry point on x86-64: thunks and detail stubs, prologue relocation, the checks for branches into
// overwritten bytes, direct, atomic and stopped-world patching, and the fork handler that undoes direct patches.

// The fork handler, run in a forked child before anything else there: it gives the child zeroed counters and
// detail records of its own (the regions of the fork state, adoption.js), which the child's agent then maps its
// shared files over, and it puts back the first bytes of functions whose thunks a child loses: those in memory
// Frida frees when the child's Frida agent unloads this script (Memory.alloc, when nothing near the library was
// free). The child's own agent, loaded by child gating, adopts the other hooks and hooks the rest afresh.
// Restore table layout: u64 count, then per patch u64 address and 8 original bytes (5 are written back).
const RESTORE_SIZE = 1 << 20;

function installForkHandler() {
  if (!IS_X64 || Process.platform !== 'linux') return;
  const reg = Module.findGlobalExportByName('__register_atfork');
  const mprotect = Module.findGlobalExportByName('mprotect');
  const mmap = Module.findGlobalExportByName('mmap');
  const getpid = Module.findGlobalExportByName('getpid');
  if (reg === null || mprotect === null || mmap === null || getpid === null) return;
  const fork = newForkState();
  const table = fork === null ? null : ownMap(RESTORE_SIZE);
  const code = table === null ? null : ownMap(PAGE);
  if (code === null) return;
  const w = new X86Writer(code);
  w.putPushReg('rbx'); w.putPushReg('r12'); w.putPushReg('r13'); // the calls below need rsp 16-aligned
  // Each region: mmap(address, size, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, -1, 0).
  w.putMovRegAddress('rbx', fork.p);
  w.putMovRegRegOffsetPtr('r12', 'rbx', FS.regionCount);
  w.putAddRegImm('rbx', FS.regions);
  w.putLabel('region');
  w.putTestRegReg('r12', 'r12');
  w.putJccNearLabel('je', 'regions_done', 'no-hint');
  w.putMovRegRegPtr('rdi', 'rbx');
  w.putMovRegRegOffsetPtr('rsi', 'rbx', 8);
  w.putMovRegU32('edx', 3);
  w.putMovRegU32('ecx', 0x32);
  w.putMovRegU64('r8', uint64('0xffffffffffffffff'));
  w.putMovRegU64('r9', 0);
  w.putCallAddressWithArguments(mmap, []);
  w.putAddRegImm('rbx', 16);
  w.putDecReg('r12');
  w.putJmpNearLabel('region');
  w.putLabel('regions_done');
  w.putCallAddressWithArguments(getpid, []);
  w.putMovRegAddress('rbx', fork.p.add(FS.forkedPid));
  w.putMovRegPtrReg('rbx', 'rax'); // this child's pid: it ran the handler (readForkState)
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
  if (register(NULL, NULL, code, NULL) !== 0) return;
  S.restoreTable = table;
  S.fork = fork;
}

function rememberPatch(fn, original) {
  if (S.restoreTable === null || !S.codeLent) return; // a durable thunk: the child adopts it
  const n = u64(S.restoreTable);
  if (8 + (n + 1) * 16 > RESTORE_SIZE) return;
  const row = S.restoreTable.add(8 + n * 16);
  row.writePointer(fn);
  const bytes = new Uint8Array(fn.readByteArray(8));
  if (original !== undefined) bytes.set(original.subarray(0, 5));
  row.add(8).writeByteArray(bytes.buffer);
  S.restoreTable.writeU64(n + 1); // last: a fork between the two writes sees the table without this row
}

function forgetLastPatch(fn) {
  if (S.restoreTable === null || !S.codeLent) return;
  const n = u64(S.restoreTable);
  if (n > 0 && S.restoreTable.add(8 + (n - 1) * 16).readPointer().equals(fn)) S.restoreTable.writeU64(n - 1);
}

// A library that goes away (dlclose) takes its patches with it: its rows must not write into whatever is
// mapped there next.
function forgetPatches(m) {
  if (S.restoreTable === null) return;
  const n = u64(S.restoreTable);
  const lo = m.base, hi = m.base.add(m.size);
  for (let i = 0; i < n; i++) {
    const row = S.restoreTable.add(8 + i * 16);
    const a = row.readPointer();
    if (a.compare(lo) >= 0 && a.compare(hi) < 0) row.writePointer(NULL);
  }
}

// One hook's block of code: the thunk, the detail stub, the per-CPU fallback and room for a whole copy of a short
// function.
const THUNK_SIZE = 224, STUB_SIZE = 48, FALLBACK_SIZE = 32, CLONE_SIZE = 192;
const STUB_AT = THUNK_SIZE, FALLBACK_AT = STUB_AT + STUB_SIZE, CLONE_AT = FALLBACK_AT + FALLBACK_SIZE;
const BLOCK_SIZE = CLONE_AT + CLONE_SIZE;
const WRITTEN_AT_ONCE = CLONE_AT; // head, stub and fallback: one copy (buildThunk, writeThunk)

// The block at `code`, whose address as a number is `at`: pointers to its parts, and `at` for the encoder.
function blockAt(code, at) {
  return { thunk: code, stub: code.add(STUB_AT), fallback: code.add(FALLBACK_AT), clone: code.add(CLONE_AT), at };
}

// jmp [rip+0]; dq orig
function jumpTail(at, orig) {
  writeBytes(at, jumpAbs(num(orig)));
}

// The fastest tail: the function's first instructions, relocated right after the counting head, then a jump
// back into the function. No trip through the Interceptor's trampoline, and the hot path stays in one or two
// cache lines. Up to 16 bytes are taken (the Interceptor may overwrite that many; hookExport checks how many it
// did). Returns the number of bytes relocated, or 0 when they do not relocate.
function relocatePrologue(fn, at, limit) {
  if (S.relocation === null) {
    const w = new X86Writer(at, { pc: at });
    S.relocation = { w, r: new X86Relocator(fn, w) };
  } else {
    S.relocation.w.reset(at, { pc: at });
    S.relocation.r.reset(fn, S.relocation.w);
  }
  const { w, r } = S.relocation;
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
function mayBranchInto(fn, n, limit) {
  if (limit === undefined || fn.add(262).compare(limit) > 0) return true;
  if (S.mayBranchFn === null) S.mayBranchFn = new NativeFunction(S.cm.cudatrace_may_branch_into, 'int', ['pointer', 'int']);
  return S.mayBranchFn(fn, n) !== 0;
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

// One detail listener for all entry points (x86-64): every detail stub loads its entry's record into r11 and
// where it goes on into r10, then jumps here; the listener (detail.c) takes the record from r11, and the code
// after the NOPs jumps to r10. One Interceptor.attach per process instead of one per entry point, which cost
// ~0.15 ms each (0.6 s of a PyTorch process's start-up). r10 and r11 are scratch at a call in both x64
// conventions, and the Interceptor gives the listener's code the registers it was entered with.
// `adopted`: the parent's page, where the adopted detail stubs go (the child's copy, without the parent's listener).
function setupDispatch(adopted) {
  if (!IS_X64 || S.cfg.detailCalls === 0 || S.cfg.events) return null; // events: a JavaScript listener per stub
  const code = adopted !== undefined ? adopted : lastingAlloc(PAGE);
  if (adopted === undefined) {
    Memory.protect(code, PAGE, 'rwx');
    writeBytes(code, DISPATCH_PAGE);
  }
  Interceptor.attach(code, S.cm);
  Interceptor.flush();
  S.dispatchAt = num(code);
  return code;
}

// The stub the first calls go through: to the shared listener, or (no dispatch) its own NOPs for the
// Interceptor and a jump to `orig`. Where it goes on can be changed later (setStubTarget).
function stubBytes(origAt, e) {
  return S.dispatch !== null ? dispatchStub(e.detailAt, origAt, S.dispatchAt) : listenerStub(origAt);
}

function setStubTarget(stub, target) {
  stub.add(S.dispatch !== null ? DISPATCH_STUB_TARGET : LISTENER_STUB_TARGET).writePointer(target);
}

function newEntry(module, path, fn, aliases) {
  const id = S.entries.length;
  const e = { id, module, path, fn, aliases, slot: -1, detail: null, js: null };
  S.entries.push(e);
  S.lastSent.push(-1);
  return e;
}

// A thunk + stub pair in block L for entry e whose tail jumps to `orig` (pointers handed out by cuGetProcAddress).
function writeThunk(L, e, orig) {
  const block = new Uint8Array(WRITTEN_AT_ONCE), origAt = num(orig);
  block.set(jumpAbs(origAt), countBytes(L, e, block));
  block.set(stubBytes(origAt, e), STUB_AT);
  L.thunk.writeByteArray(block.buffer);
  attachStub(L.stub, e);
  return L.thunk;
}

// Without the shared dispatch, each stub carries its own listener.
function attachStub(stub, e) {
  if (S.cfg.detailCalls !== 0 && S.dispatch === null) {
    Interceptor.attach(stub, S.cm, e.detail);
    if (S.cfg.events) attachEvents(stub, e);
  }
}

function nearJumpTo(fn, target) {
  return fn.readU8() === 0xe9 && fn.add(5).add(fn.add(1).readS32()).equals(target);
}

// Block L (blockAt) for entry e: the counting head, then fn's first instructions relocated after it (`own` bytes
// of them; 0 when they do not relocate) and a jump back into fn. The head, the detail stub (going on to the
// relocated instructions) and the per-CPU fallback are written with one copy, before the relocation.
function buildThunk(fn, L, e) {
  const block = new Uint8Array(WRITTEN_AT_ONCE);
  const headLength = countBytes(L, e, block);
  const tailAt = L.at + headLength;
  block.set(stubBytes(tailAt, e), STUB_AT);
  L.thunk.writeByteArray(block.buffer);
  const tail = L.thunk.add(headLength);
  return { tail, tailAt, own: relocatePrologue(fn, tail, L.stub) };
}

// Hook an exported function: counting head, then (best) its relocated prologue, else a jump to the
// Interceptor's trampoline, else (a short function Frida declines) a jump to a whole copy of it.
//
// In a running process (attached, or a library loaded later by other means than dlopen) other threads may be
// executing the prologue while it is overwritten (world.c says why that crashes programs). There the agent
// writes the jumps itself with the other threads stopped (finishPending), once the Interceptor has committed the
// module's detail stubs, and puts the original bytes back before the host detaches (release); without a stopped
// world (not Linux) it writes them with one atomic store. Returns the method, or 'pending'.
function hookExport(fn, L, e, next, pending, limit, size) {
  // A branch inside the function to its first 5 bytes would land in the middle of the jump written there: no
  // hook that overwrites the start is safe (the Interceptor does not see every such loop, and a program whose
  // function loops back to its second instruction crashed). A branch to later bytes of the relocated prologue
  // is fine: those bytes stay as they were.
  if (!noBranchInto(fn, 5, limit, size)) throw new Error('a branch inside it lands in its first 5 bytes');
  const before = new Uint8Array(fn.readByteArray(32));
  const { tail, own } = buildThunk(fn, L, e);
  if (own === 0) { // a placeholder until the real target is known
    jumpTail(tail, fn);
    setStubTarget(L.stub, fn);
  }
  attachStub(L.stub, e);
  const h = { fn, L, e, tail, own, before, next, limit, size, how: 'inline' };
  const direct = own !== 0;
  // Nothing runs the library's code yet (its dlopen has not returned, or the spawned program has not started):
  // the jump goes in directly, without the Interceptor's transaction per function.
  if (direct && (S.lateScan || !S.livePatching) && patchJump(fn, L.at, false)) return 'inline';
  if (!S.lateScan && S.livePatching && S.world !== null) {
    if (!direct) {
      if (!buildClone(fn, L.clone, next)) throw new Error('cannot be hooked safely while the program runs');
      jumpTail(tail, L.clone);
      setStubTarget(L.stub, L.clone);
      h.how = 'clone';
    }
    pending.push(h);
    return 'pending';
  }
  if (direct && !S.lateScan && S.livePatching && atomicallyPatchable(fn)) {
    pending.push(h);
    return 'pending';
  }
  return hookWithInterceptor(h);
}

function hookWithInterceptor(h) {
  const { fn, L, tail, own, before, next } = h;
  closeSpan(); // the Interceptor leaves the pages it writes r-x
  let orig;
  try {
    orig = Interceptor.replaceFast(fn, L.thunk);
  } catch (err) {
    // Frida declines functions too short to relocate; a short straight-line function can be copied whole.
    if (!buildClone(fn, L.clone, next)) throw err;
    jumpTail(tail, L.clone);
    setStubTarget(L.stub, L.clone);
    if (!S.lateScan && S.livePatching) Interceptor.flush(); // the stub's listener before the thunk is reachable
    if (!patchJump(fn, L.at, !S.lateScan && S.livePatching)) {
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
    S.hookCounts[h.how]++;
    h.e.how = h.how;
    S.hookedAddrs.set(h.fn.toString(), h.e.id);
  };
  if (S.world !== null) {
    for (const h of pending) {
      if (h.how !== 'far') h.bytes = jump5(num(h.fn), h.L.at);
      h.original = new Uint8Array(h.fn.readByteArray(h.bytes.length));
    }
    const written = new Set(worldPatch(pending));
    for (const h of pending) {
      if (written.has(h)) {
        if (h.how !== 'far') rememberPatch(h.fn, h.original);
        S.directPatches.push([h.fn, h.original]);
        done(h);
      } else {
        S.skipped.push([m.name, h.e.fn, 'busy: a thread kept running its first bytes']);
        h.e.dead = true;
      }
    }
    return;
  }
  for (const h of pending) {
    try {
      if (patchJump(h.fn, h.L.at, true)) h.how = 'inline';
      else h.how = hookWithInterceptor(h);
    } catch (err) {
      S.skipped.push([m.name, h.e.fn, String(err.message || err)]);
      h.e.dead = true;
      continue;
    }
    done(h);
  }
}

// A thunk out of branch range: the prologue gets `jmp [rip+0]; dq thunk` (14 bytes), so at least 14 bytes of it
// must relocate with no branch into them. Written with the world stopped in a running program (never by halves),
// plainly when the library has just been loaded or the program has not started. Far patches are not in the
// fork handler's table (it restores 5 bytes): their thunks are in memory of the agent's own, and a forked child
// adopts them like the others (adoption.js).
function hookFar(fn, L, e, pending, limit, size) {
  const { tail, own } = buildThunk(fn, L, e);
  if (own < 14 || !noBranchInto(fn, 14, limit, size)) throw new Error('no memory within branch range, prologue too short for a far jump');
  attachStub(L.stub, e);
  const h = { fn, L, e, tail, own, how: 'far', bytes: jumpAbs(L.at) };
  if (!S.lateScan && S.livePatching) {
    if (S.world === null) throw new Error('no memory within branch range, and no stopped world to write a far jump');
    pending.push(h);
    return 'pending';
  }
  const original = new Uint8Array(fn.readByteArray(14));
  closeSpan();
  Memory.patchCode(fn, 14, c => writeBytes(c, h.bytes));
  S.directPatches.push([fn, original]);
  return 'far';
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

// Writing a 5-byte jump over a prologue other threads may be running: two separate stores (opcode, then
// displacement) can be seen half done, a wild jump. The 5 bytes go in with one aligned 8-byte store, or one
// lock cmpxchg16b when they straddle 8 bytes inside an aligned 16; `live` false (a library dlopen has not returned
// yet) allows a plain write otherwise. Linux x86-64 (SysV calls); elsewhere Memory.patchCode.
function atomicWriters() {
  if (S.atomics !== null || Process.platform !== 'linux' || !IS_X64) return S.atomics;
  const code = lastingAlloc(PAGE);
  const copy8 = [0x48, 0x8b, 0x06, 0x48, 0x89, 0x07, 0xc3]; // mov rax, [rsi]; mov [rdi], rax; ret
  const cas16 = [0x53, 0x49, 0x89, 0xd0, 0x48, 0x8b, 0x06, 0x48, 0x8b, 0x56, 0x08, 0x49, 0x8b, 0x18, 0x49, 0x8b,
    0x48, 0x08, 0xf0, 0x48, 0x0f, 0xc7, 0x0f, 0x0f, 0x94, 0xc0, 0x0f, 0xb6, 0xc0, 0x5b, 0xc3];
  // push rbx; mov r8, rdx; mov rax, [rsi]; mov rdx, [rsi+8]; mov rbx, [r8]; mov rcx, [r8+8];
  // lock cmpxchg16b [rdi]; sete al; movzx eax, al; pop rbx; ret
  writeBytes(code, copy8);
  writeBytes(code.add(16), cas16);
  S.atomics = {
    copy8: new NativeFunction(code, 'void', ['pointer', 'pointer']),
    cas16: new NativeFunction(code.add(16), 'int', ['pointer', 'pointer', 'pointer']),
    scratch: code.add(256),
  };
  return S.atomics;
}

function atomicallyPatchable(fn) {
  const addr = parseInt(fn.toString(16), 16);
  return atomicWriters() !== null && (addr % 8 <= 3 || addr % 16 <= 11);
}

// A module scanned before its code runs (its dlopen has not returned, or the program has not started) gets its
// jumps with the span of code they fall in made writable once, not two mprotect calls per function (~9 µs each
// time, a tenth of the hooking). `addrs`: the functions' addresses, as numbers. Only when the whole span lies in one
// executable range of the module (the protection put back is that range's own); else each write protects its
// page(s) as before. Anything else that patches code in the span (the Interceptor, Memory.patchCode) puts its
// pages back to r-x when done, so the span is closed before those run (closeSpan).
function openSpan(addrs) {
  if (Process.platform !== 'linux' || !IS_X64 || addrs.length < 2) return;
  let lo = addrs[0], hi = addrs[0];
  for (const a of addrs) { if (a < lo) lo = a; if (a > hi) hi = a; }
  const range = Process.findRangeByAddress(ptr(lo));
  if (range === null || range.protection !== 'r-x') return;
  const rangeEnd = num(range.base) + range.size;
  if (hi + 5 > rangeEnd) return;
  const first = lo - (lo % PAGE), end = Math.min(rangeEnd, hi + 5 + PAGE - ((hi + 5) % PAGE || PAGE));
  if (!Memory.protect(ptr(first), end - first, 'rwx')) return;
  S.writable = { first, end, prot: range.protection };
}

function closeSpan() {
  const w = S.writable;
  if (w === null) return;
  S.writable = null;
  Memory.protect(ptr(w.first), w.end - w.first, w.prot);
}

function inSpan(fn) {
  const w = S.writable;
  if (w === null) return false;
  const a = num(fn);
  return a >= w.first && a + 5 <= w.end;
}

function writeJump5(fn, bytes, live) {
  if (!live && inSpan(fn)) {
    writeBytes(fn, bytes);
    return true;
  }
  if (!live && Process.platform === 'linux' && IS_X64) {
    // Nothing runs the function yet: a plain write, with only the page(s) it touches made writable.
    const first = fn.and(ptr(-PAGE)), span = fn.add(4).and(ptr(-PAGE)).sub(first).toInt32() + PAGE;
    Memory.protect(first, span, 'rwx');
    try { writeBytes(fn, bytes); } finally { Memory.protect(first, span, 'r-x'); }
    return true;
  }
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
  closeSpan();
  Memory.patchCode(fn, 5, code => writeBytes(code, bytes));
  return true;
}

// Stopping the world to patch a running program (world.c says why). The signal handler is machine code in memory
// that is never freed: a thread that had the signal blocked may take it after the script is gone.
function setupWorld() {
  if (!IS_X64 || Process.platform !== 'linux' || !S.cfg.worldSource) return null;
  const sigactionPtr = Module.findGlobalExportByName('sigaction');
  if (sigactionPtr === null) return null;
  const sigaction = new NativeFunction(sigactionPtr, 'int', ['int', 'pointer', 'pointer']);
  const state = lastingAlloc(24 + 8 * 1024);
  const handler = lastingAlloc(PAGE);
  writeBytes(handler, parkHandler(num(state)));
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
      mod = new CModule(S.cfg.worldSource, syms);
    } catch (_) {
      return null; // no stopped world: jumps in a running program are written with one atomic store
    }
    S.keep.push(mod);
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
    S.world.patch(S.world.state, S.world.sig, buf, todo.length, 300, PAGE);
    S.patching.stops++;
    S.patching.threads = Math.max(S.patching.threads, S.world.state.readU32());
    S.patching.unknown = Math.max(S.patching.unknown, S.world.state.add(16).readU32());
    const again = [];
    todo.forEach((it, i) => (buf.add(32 * i + 28).readS32() === 1 ? written : again).push(it));
    todo = again;
  }
  S.patching.written += written.length;
  return written;
}

// Jump from fn to its thunk at `thunkAt` (a number); false when that cannot be written safely while the program runs.
function patchJump(fn, thunkAt, live) {
  const original = new Uint8Array(fn.readByteArray(5));
  const b = jump5(num(fn), thunkAt);
  rememberPatch(fn);
  if (!writeJump5(fn, b, live)) { forgetLastPatch(fn); return false; }
  S.directPatches.push([fn, original]);
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

// The first function start above `addr` in the sorted numbers `starts`, or null.
function nextStart(starts, addr) {
  let lo = 0, hi = starts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid] <= addr) lo = mid + 1; else hi = mid;
  }
  return lo < starts.length ? starts[lo] : null;
}
