// detail.c's cudatrace_detail_layout: the record's size, its fields' offsets, then its array lengths.
const LAYOUT_FIELDS = ['size', 'first', 'time', 'calls', 'nCodes', 'nCallers', 'codes', 'codeCounts', 'otherCodes',
  'callers', 'callerCounts', 'otherCallers', 'statuses', 'callerSlots'];

function readDetailLayout(table) {
  const layout = {};
  LAYOUT_FIELDS.forEach((name, i) => { layout[name] = table.add(8 * i).readU64().toNumber(); });
  return layout;
}

function openSharedCounters(path, cap) {
  // Linux only: a MAP_SHARED file mapping outlives the process for the host to read.
  const open = new NativeFunction(Module.getGlobalExportByName('open'), 'int', ['pointer', 'int', 'int']);
  const ftruncate = new NativeFunction(Module.getGlobalExportByName('ftruncate'), 'int', ['int', 'int64']);
  const mmap = new NativeFunction(Module.getGlobalExportByName('mmap'), 'pointer',
    ['pointer', 'size_t', 'int', 'int', 'int', 'int64']);
  const close = new NativeFunction(Module.getGlobalExportByName('close'), 'int', ['int']);
  const fd = open(Memory.allocUtf8String(path), 0x42 /* O_RDWR|O_CREAT */, 0x180 /* 0600 */);
  if (fd < 0) return null;
  const size = S.counterRows * cap * 8;
  if (ftruncate(fd, size) !== 0) { close(fd); return null; }
  const p = mmap(NULL, size, 3 /* PROT_READ|PROT_WRITE */, 1 /* MAP_SHARED */, fd, 0);
  close(fd);
  if (p.equals(ptr(-1))) return null;
  return p;
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
const RSEQ_SIG = 0x53053053; // glibc's signature on x86

const CS_SIZE = 64;

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
  if (S.csPool === null || S.csPool.used === S.csPool.cap) {
    const cap = 4096;
    const base = ownMap(cap * CS_SIZE);
    if (base === null) throw new Error('no memory for restartable sequences');
    S.csPool = { base, used: 0, cap };
  }
  const cs = S.csPool.base.add(S.csPool.used * CS_SIZE);
  S.csPool.used++;
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
  const slotAddr = S.counters.add(e.slot * 8);
  const b = [];
  if (S.rseq !== null) {
    const csAt = b.length + 2;
    b.push(0x49, 0xbb); le64(b, NULL); // movabs r11, &descriptor (filled in below)
    b.push(0x64, 0x4c, 0x89, 0x1c, 0x25); le32(b, S.rseq.offset + 8); // mov qword fs:[rseq_cs], r11
    const start = b.length;
    b.push(0x64, 0x44, 0x8b, 0x14, 0x25); le32(b, S.rseq.offset + 4); // mov r10d, dword fs:[cpu_id]
    b.push(0x41, 0x81, 0xfa); le32(b, S.rseq.cpus); // cmp r10d, cpus
    b.push(0x0f, 0x83); le32(b, L.fallback.sub(L.thunk.add(b.length + 4)).toInt32()); // jae fallback
    const shift = Math.log2(S.counterCap * 8);
    if (Number.isInteger(shift)) b.push(0x49, 0xc1, 0xe2, shift); // shl r10, log2(row size)
    else { b.push(0x4d, 0x69, 0xd2); le32(b, S.counterCap * 8); } // imul r10, r10, row size
    b.push(0x49, 0xbb); le64(b, slotAddr); // movabs r11, &row0[slot]
    b.push(0x4b, 0xff, 0x04, 0x13); // inc qword [r11 + r10]: the commit, last instruction of the sequence
    const post = b.length;
    const cs = newSequence(L.thunk.add(start), post - start, L.thunk);
    const a = [];
    le64(a, cs);
    for (let i = 0; i < 8; i++) b[csAt + i] = a[i];
    // Fallback, for a thread whose CPU number is not valid: a locked increment in the last row.
    const f = [0x49, 0xbb];
    le64(f, S.counters.add((S.rseq.cpus * S.counterCap + e.slot) * 8)); // movabs r11, &rowN[slot]
    f.push(0xf0, 0x49, 0xff, 0x03); // lock inc qword [r11]
    f.push(0xe9); le32(f, L.thunk.add(post).sub(L.fallback.add(f.length + 4)).toInt32()); // jmp back after the commit
    writeBytes(L.fallback, f);
  } else {
    b.push(0x49, 0xbb); le64(b, slotAddr); // movabs r11, &counter (r11 and r10 are scratch in both x64 conventions)
    if (S.cfg.counters !== 'plain') b.push(0xf0); // lock prefix: exact under threads, ~20 cycles on some CPUs
    b.push(0x49, 0xff, 0x03); // inc qword [r11]
  }
  const n = S.cfg.detailCalls;
  if (n > 0) {
    // The detail listener counts the calls it saw; below the budget, take the stub. The counter is written only
    // while the budget lasts, so afterwards this is a read of a line every core holds unmodified.
    b.push(0x49, 0xbb); le64(b, e.detail.add(S.layout.calls)); // movabs r11, &detail.calls
    b.push(0x49, 0x81, 0x3b); le32(b, Math.min(n, 0x7fffffff)); // cmp qword [r11], N
    b.push(0x0f, 0x82); le32(b, L.stub.sub(L.thunk.add(b.length + 4)).toInt32()); // jb detail_stub
  } else if (n < 0) {
    b.push(0xe9); le32(b, L.stub.sub(L.thunk.add(b.length + 4)).toInt32()); // jmp detail_stub: every call
  }
  return b;
}

function newDetail(_index) {
  if (S.detailPool === null || S.detailPool.used === S.detailPool.cap) {
    const cap = 1024;
    S.detailPool = { base: lastingAlloc(cap * S.layout.size), used: 0, cap };
  }
  const d = S.detailPool.base.add(S.detailPool.used * S.layout.size);
  S.detailPool.used++;
  d.writeByteArray(new ArrayBuffer(S.layout.size));
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
