// A forked child keeps its parent's hooks: the prologues the agent patched itself, their thunks and the thunks of
// pointers cuGetProcAddress handed out all lie in memory of the agent's own, which the child has a copy of. Only
// the counters and detail records must become the child's: the fork handler (installForkHandler) maps fresh zeroed
// memory over them in the child, and the child's agent maps its own shared files at the same addresses and adopts
// every entry its parent logged, instead of hooking every library again (~0.15 ms an entry point: 0.7 s for a
// PyTorch-sized process, paid by each DataLoader worker).
//
// The fork state: one page of the agent's own memory, read by the fork handler in the child and by the child's
// agent (the host passes its address, from the parent's answer to configure). u64 fields at these offsets:
// forkedPid: written by the fork handler in each child (its pid). A child of vfork() (or of clone() sharing the
// parent's memory) runs no fork handler: it must not map anything over its parent's counters, which are its own.
const FS = {
  magic: 0, pid: 8, counterUsed: 16, logAt: 24, logLength: 32, logCapacity: 40, countersAt: 48, counterRows: 56,
  counterCap: 64, detailAt: 72, detailCap: 80, dispatchAt: 88, restoreTable: 96, regionCount: 104, forkedPid: 112,
  regions: 120,
};
const FORK_MAGIC = '0x31544f4443415443'; // "CTACDOT1", little-endian
const FORK_MAX_REGIONS = Math.floor((4096 - FS.regions) / 16);
// The adoption log: JSON arrays, a line each, appended and then committed by storing the new length: a library
// (["lib", name, path, base]) then a line per entry of it whose hook a forked child can keep ([slot, detail
// record, function, aliases, how, then the patched address and its original bytes in hex, or for a returned
// pointer's thunk 'proc', the pointer and the thunk; then the detail stub]). Reserved, not touched: pages are used
// as lines are written.
const ADOPTION_LOG_SIZE = 32 << 20;

function newForkState() {
  const state = ownMap(PAGE);
  const log = state === null ? ptr(-1)
    : libcMmap()(NULL, ADOPTION_LOG_SIZE, 3, 0x22 | 0x4000 /* MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE */, -1, 0);
  if (log.equals(ptr(-1))) return null;
  state.add(FS.magic).writeU64(uint64(FORK_MAGIC));
  state.add(FS.logAt).writePointer(log);
  state.add(FS.logCapacity).writeU64(ADOPTION_LOG_SIZE);
  return { p: state, log, length: 0, cap: ADOPTION_LOG_SIZE };
}

// What a forked child must know of this process, in the fork state; called once the counters, detail records,
// dispatch and restore table are set up.
function describeForFork() {
  const F = S.fork;
  if (F === null) return;
  F.p.add(FS.pid).writeU64(Process.id);
  F.p.add(FS.counterUsed).writeU64(S.counterUsed);
  F.p.add(FS.countersAt).writePointer(S.counters);
  F.p.add(FS.counterRows).writeU64(S.counterRows);
  F.p.add(FS.counterCap).writeU64(S.counterCap);
  F.p.add(FS.detailAt).writePointer(S.detailShared !== null ? S.detailShared.p : NULL);
  F.p.add(FS.detailCap).writeU64(S.detailShared !== null ? S.detailShared.cap : 0);
  F.p.add(FS.dispatchAt).writePointer(S.dispatch !== null ? S.dispatch : NULL);
  F.p.add(FS.restoreTable).writePointer(S.restoreTable !== null ? S.restoreTable : NULL);
}

// Memory the fork handler replaces with zeroed memory in a child: counters and detail records.
function forkRegion(p, size) {
  const F = S.fork;
  if (F === null) return;
  const n = u64(F.p.add(FS.regionCount));
  if (n >= FORK_MAX_REGIONS) return; // that region's counts then start with the parent's in the child
  const row = F.p.add(FS.regions + 16 * n);
  row.writePointer(p);
  row.add(8).writeU64(size);
  F.p.add(FS.regionCount).writeU64(n + 1);
}

// The counters in use, for a child to allocate after: `upTo` reserves those about to be taken (a fork in the middle
// of hooking a library must not give the child slots the library's new thunks count in).
function noteCounterUsed(upTo) {
  if (S.fork !== null) S.fork.p.add(FS.counterUsed).writeU64(upTo === undefined ? S.counterUsed : upTo);
}

// Log entries a child can adopt: hooked by a patch of the agent's own into durable memory, or a returned pointer's
// thunk. One write and one committing store for all of them.
function logForAdoption(entries) {
  const F = S.fork;
  if (F === null || entries.length === 0) return;
  const lines = [];
  let lib = null;
  for (const e of entries) {
    if (e.dead || e.slot < 0 || e.detail === null || !(e.viaProc || e.direct === true)) continue;
    if (lib !== e.path) {
      lib = e.path;
      lines.push(JSON.stringify(['lib', e.module, e.path, e.viaProc ? '' : e.base]));
    }
    const tail = e.viaProc ? [e.procKey, e.thunk] : [e.address, hex(e.original)];
    lines.push(JSON.stringify([e.slot, e.detailAt, e.fn, e.aliases, e.viaProc ? 'proc' : e.how, tail[0], tail[1],
      e.stubAt]));
  }
  if (lines.length === 0) return;
  let text = lines.join('\n') + '\n';
  // ASCII only (JSON escapes the rest), so the length in bytes is the string's
  if (/[^\x00-\x7f]/.test(text)) text = text.replace(/[^\x00-\x7f]/g, c => '\\u' + ('000' + c.charCodeAt(0).toString(16)).slice(-4));
  if (F.length + text.length + 1 > F.cap) return; // full: a child hooks the rest afresh
  F.log.add(F.length).writeUtf8String(text);
  F.length += text.length;
  F.p.add(FS.logLength).writeU64(F.length); // last: a fork before this store sees the log without these lines
}

// The parent's fork state, checked against this process's configuration; null when it cannot be adopted (then the
// child hooks everything afresh, on top of its parent's patches, whose counts go to memory nobody reads).
function readForkState(adopt) {
  if (!IS_X64 || Process.platform !== 'linux' || adopt === null || adopt === undefined) return null;
  const p = ptr(adopt.at);
  try {
    if (!p.readU64().equals(uint64(FORK_MAGIC)) || u64(p.add(FS.pid)) !== adopt.pid) return null;
    if (u64(p.add(FS.forkedPid)) !== Process.id) return null; // no fork handler ran: the parent's memory
  } catch (_) {
    return null;
  }
  const A = {
    p, counterUsed: u64(p.add(FS.counterUsed)), countersAt: p.add(FS.countersAt).readPointer(),
    counterRows: u64(p.add(FS.counterRows)), counterCap: u64(p.add(FS.counterCap)),
    detailAt: p.add(FS.detailAt).readPointer(), detailCap: u64(p.add(FS.detailCap)),
    dispatchAt: p.add(FS.dispatchAt).readPointer(), restoreTable: p.add(FS.restoreTable).readPointer(),
    log: p.add(FS.logAt).readPointer(), length: u64(p.add(FS.logLength)), cap: u64(p.add(FS.logCapacity)),
  };
  if (A.counterRows !== S.counterRows || A.counterCap !== S.counterCap) return null;
  // The detail stubs go to the parent's dispatch page, which Frida put back as it was (NOPs, jmp r10) in the child
  // (without one, --events or count-only, each stub gets its listener again: adoptEntries).
  const dispatching = IS_X64 && S.cfg.detailCalls !== 0 && !S.cfg.events;
  if (dispatching !== !A.dispatchAt.isNull()) return null;
  if (dispatching) {
    const page = new Uint8Array(A.dispatchAt.readByteArray(DISPATCH_PAGE.length));
    for (let i = 0; i < DISPATCH_PAGE.length; i++) if (page[i] !== DISPATCH_PAGE[i]) return null;
  }
  return A;
}

// Counters and detail records at the parent's addresses: this process's own shared files mapped there (the counts
// made since the fork, by other fork handlers, carried over), or the zeroed memory the fork handler left.
function takeOverStorage(A) {
  S.counterUsed = A.counterUsed;
  const used = S.counterUsed * 8, rowSize = S.counterCap * 8;
  S.counters = A.countersAt;
  if (S.cfg.sharedCounters !== null) {
    const rows = [];
    if (used > 0) for (let r = 0; r < S.counterRows; r++) rows.push(A.countersAt.add(r * rowSize).readByteArray(used));
    if (openShared(S.cfg.sharedCounters, S.counterRows * rowSize, A.countersAt) !== null) {
      rows.forEach((bytes, r) => A.countersAt.add(r * rowSize).writeByteArray(bytes));
      S.shmPath = S.cfg.sharedCounters;
    }
  }
  if (S.shmPath !== null && !A.detailAt.isNull()) {
    S.detailShared = openSharedDetail(S.cfg.sharedCounters + '.detail', A.detailCap, A.detailAt);
    if (S.detailShared !== null) {
      // The records in use must have their blocks on disk: a full file system would be a SIGBUS in the program.
      const want = Math.min(A.detailCap, Math.ceil(S.counterUsed / 1024) * 1024);
      if (want === 0 || S.detailShared.reserve(want * S.layout.size)) {
        S.detailShared.reserved = want;
        S.detailPath = S.cfg.sharedCounters + '.detail';
      } else {
        S.detailShared = null;
        zeroMap(A.detailAt, A.detailCap * S.layout.size); // private records again, as the fork handler left them
      }
    }
  }
}

function zeroMap(p, size) {
  return !libcMmap()(p, size, 3, 0x32 /* MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED */, -1, 0).equals(ptr(-1));
}

// The fork state and restore table become this process's (its own copies): the inherited fork handler serves it.
function takeOverForkState(A) {
  S.fork = { p: A.p, log: A.log, length: A.length, cap: A.cap };
  S.fork.p.add(FS.pid).writeU64(Process.id);
  if (!A.restoreTable.isNull()) {
    S.restoreTable = A.restoreTable;
    S.restoreTable.writeU64(0); // its rows were written back at the fork
  }
}

// The parent's logged entries whose library is still where it was: entries of this process with the same slots,
// records and thunks. Returns how many.
function adoptEntries(A) {
  const text = A.length > 0 ? A.log.readUtf8String(A.length) : '';
  const bases = new Map();
  for (const m of Process.enumerateModules()) bases.set(m.path, m.base.toString());
  let n = 0, lib = null, here = false;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let row;
    try { row = JSON.parse(line); } catch (_) { continue; }
    if (row[0] === 'lib') {
      const [, module, path, base] = row;
      lib = { module, path, base };
      // still where it was (not unloaded, not loaded again elsewhere); a returned pointer's library, loaded
      here = base === '' ? (path === '' || bases.has(path)) : bases.get(path) === base;
      continue;
    }
    const [slot, detailAt, fn, aliases, how, at, extra, stub] = row;
    if (lib === null || !here || slot >= S.counterUsed) continue;
    const e = newEntry(lib.module, lib.path, fn, aliases);
    e.slot = slot;
    e.detailAt = detailAt;
    e.detail = ptr(detailAt);
    e.how = how;
    if (how === 'proc') {
      e.viaProc = true;
      e.procKey = at;
      e.thunk = extra;
      S.procThunks.set(at, ptr(extra));
    } else {
      e.direct = true;
      e.address = at;
      e.original = unhex(extra);
      e.base = lib.base;
      S.hookedAddrs.set(at, e.id);
      S.directPatches.push([ptr(at), e.original]);
    }
    e.stubAt = stub;
    if (S.dispatch === null) attachStub(ptr(stub), e); // its listener was the parent's script's, undone here
    S.hookCounts.adopted++;
    n++;
  }
  return n;
}

function hex(bytes) {
  let s = '';
  for (const b of bytes) s += (b < 16 ? '0' : '') + b.toString(16);
  return s;
}

function unhex(s) {
  const out = new Uint8Array(s.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.substr(2 * i, 2), 16);
  return out;
}
