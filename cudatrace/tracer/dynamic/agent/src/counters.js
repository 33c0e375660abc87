// Counter storage (a shared file the host reads after the process is gone), per-CPU counting in restartable
// sequences, the counting head of each thunk, and the detail records whose layout detail.c defines.

// detail.c's cudatrace_detail_layout: the record's size, its fields' offsets, then its array lengths.
const LAYOUT_FIELDS = ['size', 'first', 'time', 'calls', 'nCodes', 'nCallers', 'codes', 'codeCounts', 'otherCodes',
  'callers', 'callerCounts', 'otherCallers', 'statuses', 'callerSlots'];

function readDetailLayout(table) {
  const layout = {};
  LAYOUT_FIELDS.forEach((name, i) => { layout[name] = table.add(8 * i).readU64().toNumber(); });
  return layout;
}

// A file mapped MAP_SHARED (Linux): its pages outlive the process for the host to read. Its descriptor is closed
// once mapped (the program never sees one of the agent's descriptors open). `at`: in place of the memory there (a
// forked child's counters, at its parent's address). Returns the mapping, or null.
function openShared(path, size, at) {
  const open = new NativeFunction(Module.getGlobalExportByName('open'), 'int', ['pointer', 'int', 'int']);
  const ftruncate = new NativeFunction(Module.getGlobalExportByName('ftruncate'), 'int', ['int', 'int64']);
  const mmap = libcMmap();
  const close = new NativeFunction(Module.getGlobalExportByName('close'), 'int', ['int']);
  const fd = open(Memory.allocUtf8String(path), 0x80042 /* O_RDWR|O_CREAT|O_CLOEXEC */, 0x180 /* 0600 */);
  if (fd < 0) return null;
  if (ftruncate(fd, size) !== 0) { close(fd); return null; }
  const fixed = at !== undefined;
  const p = mmap(fixed ? at : NULL, size, 3 /* PROT_READ|PROT_WRITE */, fixed ? 0x11 /* MAP_SHARED|MAP_FIXED */ : 1, fd, 0);
  close(fd);
  return p.equals(ptr(-1)) ? null : p;
}

function openSharedCounters(path, cap) {
  return openShared(path, S.counterRows * cap * 8);
}

// Detail records in a shared file, one per counter slot, so that the statuses, times and callers of a process
// ended by SIGKILL (or any signal it does not handle) are read by the host too. The file is sparse; the records
// in use are reserved in chunks (posix_fallocate, through a descriptor opened for that moment), so a full file
// system is a fallback to private memory, never a SIGBUS in the program.
function openSharedDetail(path, cap, at) {
  const p = openShared(path, cap * S.layout.size, at);
  if (p === null) return null;
  const open = new NativeFunction(Module.getGlobalExportByName('open'), 'int', ['pointer', 'int', 'int']);
  const close = new NativeFunction(Module.getGlobalExportByName('close'), 'int', ['int']);
  const fallocate = new NativeFunction(Module.getGlobalExportByName('posix_fallocate'), 'int',
    ['int', 'int64', 'int64']);
  const name = Memory.allocUtf8String(path);
  const reserve = bytes => {
    const fd = open(name, 0x80002 /* O_RDWR|O_CLOEXEC */, 0);
    if (fd < 0) return false;
    const ok = fallocate(fd, 0, bytes) === 0;
    close(fd);
    return ok;
  };
  return { p, at: num(p), cap, reserved: 0, reserve };
}

// The shared record of counter slot `slot`, or null (no shared file, or no room left on its file system).
function sharedDetail(slot) {
  const D = S.detailShared;
  if (D === null || slot < 0 || slot >= D.cap) return null;
  if (slot >= D.reserved) {
    const want = Math.min(D.cap, (Math.floor(slot / 1024) + 1) * 1024);
    if (!D.reserve(want * S.layout.size)) {
      S.detailShared = null; // records from here on are private: their statuses come with the batches only
      return null;
    }
    D.reserved = want;
  }
  return { p: D.p.add(slot * S.layout.size), at: D.at + slot * S.layout.size };
}

function allocCounter() {
  if (S.counterUsed >= S.counterCap) throw new Error('counter space exhausted');
  return S.counterUsed++;
}

// Per-CPU counting (Linux x86-64 with glibc >= 2.35, which registers a restartable sequence area for every
// thread): each CPU has its own row of counters, and the increment is a plain `inc` inside a restartable
// sequence, so it is exact without a locked instruction (a `lock inc` costs ~8.5 ns a call on some server CPUs,
// the sequence ~1 ns). When the kernel preempts, migrates or signals the thread between reading its CPU number and
// the increment, it resumes the thread at the abort handler, which starts over. Rows 0..cpus-1 are the CPUs';
// row `cpus` takes locked increments from threads without a valid CPU number (no rseq area of their own).
const CS_SIZE = 64; // a descriptor block (sequenceBytes: 50 bytes)

function setupPerCpu() {
  if (!IS_X64 || Process.platform !== 'linux' || S.cfg.counters !== 'per-cpu') return null;
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
  writeBytes(probe, cpuProbe(offset));
  const cpu = new NativeFunction(probe, 'uint32', [])();
  if (cpu >= cpus) return null;
  return { offset, cpus };
}

// Room for the descriptor of one thunk's restartable sequence (sequenceBytes), with the signature the kernel
// checks before abort_ip and the abort handler (a jump back to the thunk's start). Descriptors live in memory of
// the agent's own that Frida never frees: a thread's rseq area keeps pointing at the last one it used, and the
// kernel reads it (signature included) on every preemption, also in a forked child after Frida freed the thunks.
// Returns {p, at}: the pointer and its number.
function newSequence() {
  if (S.csPool === null || S.csPool.used === S.csPool.cap) {
    const cap = 4096;
    const base = ownMap(cap * CS_SIZE);
    if (base === null) throw new Error('no memory for restartable sequences');
    S.csPool = { base, at: num(base), used: 0, cap };
  }
  const k = S.csPool.used++;
  return { p: S.csPool.base.add(k * CS_SIZE), at: S.csPool.at + k * CS_SIZE };
}

// The counting head of a thunk in block L (blockAt) for entry e; what follows it (the tail) goes on to the
// original function. The first N calls (detail budget) branch to the stub at L.stub, which carries the detail
// listener. Writes the head and the per-CPU fallback into `block` (the bytes of L from its start) and the
// sequence's descriptor into its own memory; returns the head's length. Every head of a process has the same
// layout: encoded once (headTemplate), then only its addresses are written in (headFrom).
function countBytes(L, e, block) {
  const t = headTemplate();
  const cs = S.rseq !== null ? newSequence() : null;
  headFrom(t, block, FALLBACK_AT, {
    descriptor: cs !== null ? cs.at : 0, counter: S.countersAt + e.slot * 8, detailCalls: e.detailAt + S.layout.calls,
    shared: S.rseq !== null ? S.countersAt + (S.rseq.cpus * S.counterCap + e.slot) * 8 : 0,
  });
  if (cs !== null) {
    const d = t.sequence.slice();
    put64(d, SEQUENCE_AT.start, L.at + t.start);
    put64(d, SEQUENCE_AT.abort, cs.at + RSEQ_ABORT);
    put64(d, SEQUENCE_AT.restart, L.at);
    cs.p.writeByteArray(d.buffer);
  }
  return t.head.length;
}

// countHead's result for a block at address 0 (its branches are relative to the block), with the descriptor
// made by sequenceBytes for it, as typed arrays; made once (the configuration fixes the layout).
function headTemplate() {
  if (S.headTemplate !== null) return S.headTemplate;
  const c = countHead({
    thunk: 0, fallback: FALLBACK_AT, stub: STUB_AT, counter: 0, locked: S.cfg.counters !== 'plain', rseq: S.rseq,
    descriptor: 0, shared: 0, rowSize: S.counterCap * 8, budget: S.cfg.detailCalls, detailCalls: 0,
  });
  S.headTemplate = {
    head: Uint8Array.from(c.head), fallback: c.fallback === null ? null : Uint8Array.from(c.fallback), at: c.at,
    start: c.start, length: c.length,
    sequence: c.fallback === null ? null : Uint8Array.from(sequenceBytes(0, c.start, c.length, 0)),
  };
  return S.headTemplate;
}

// A zeroed detail record for entry e (e.detail, and its address as a number in e.detailAt): the shared file's
// record of its slot (zero from the file) or one from the agent's own memory.
function newDetail(e) {
  const shared = sharedDetail(e.slot);
  if (shared !== null) {
    e.detail = shared.p;
    e.detailAt = shared.at;
    return shared.p;
  }
  if (S.detailPool === null || S.detailPool.used === S.detailPool.cap) {
    const cap = 1024;
    const base = lastingAlloc(cap * S.layout.size);
    S.detailPool = { base, at: num(base), used: 0, cap };
    forkRegion(base, cap * S.layout.size);
  }
  const k = S.detailPool.used++;
  const d = S.detailPool.base.add(k * S.layout.size);
  d.writeByteArray(new ArrayBuffer(S.layout.size));
  e.detail = d;
  e.detailAt = S.detailPool.at + k * S.layout.size;
  return d;
}

// Every counter's value: the sum of its rows (one row unless counting per CPU).
function readCounters() {
  if (S.counterUsed === 0) return null;
  const sums = new Array(S.counterUsed).fill(0);
  for (let r = 0; r < S.counterRows; r++) {
    const c32 = new Uint32Array(S.counters.add(r * S.counterCap * 8).readByteArray(S.counterUsed * 8));
    for (let i = 0; i < S.counterUsed; i++) sums[i] += c32[2 * i] + c32[2 * i + 1] * 4294967296;
  }
  return sums;
}
