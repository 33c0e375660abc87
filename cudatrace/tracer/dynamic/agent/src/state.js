// Everything the agent changes after it is loaded, in one object: set up by configure, then changed by hooks
// (any thread, under the JavaScript lock), scans and batches. Constants stay in the modules that use them.
const S = {
  // Set once by configure
  M: null, // message names, from the host (protocol.py declares them once)
  cfg: null, // the host's configuration (protocol.AgentConfig.to_rpc)
  cm: null, // CModule with the detail listener (detail.c)
  nowNs: null, // () -> nanoseconds, the detail listener's clock
  // The detail record's layout is detail.c's (struct CtDetail), read from its cudatrace_detail_layout table once
  // the CModule is built (readDetailLayout): defined once, in C. {size, first, time, calls, ...}
  layout: null,
  libPatterns: [],
  exportPattern: null,

  // Entry points and what was learned about them
  entries: [], // id -> {id, module, path, fn, aliases, slot, detail, js}
  lastSent: [], // id -> calls at last send
  hookedAddrs: new Map(), // original function address (string) -> entry id
  procThunks: new Map(), // returned pointer (string) -> thunk
  seenModules: new Map(), // path -> true
  seenNames: new Set(), // file names of the modules in seenModules
  seenBases: new Set(), // base addresses of the modules hooked (a module has one, whatever path names it)
  added: [], // modules the module observer reported since the last scan (watchModules), in load order
  callerNames: new Map(), // return address (string) -> module name
  lookups: new Map(), // key -> {symbol, version, flags, found, count, via}
  exportTables: new Map(), // uuid -> {uuid, count, statuses}
  gpuModules: new Map(), // via|from|caller|kind|ptx|sass -> {via, from, caller, kind, ptx, sass, loads, failed, lookups, kernel}
  noPtxHandles: new Map(), // handle (string) of a module without PTX, or loaded from a file -> its gpuModules record
  loaderErrors: new Map(), // requested name + message -> {requested, message, count, t}
  skipped: [], // [module, function, reason], sent with the next hooks message
  hookCounts: { inline: 0, trampoline: 0, clone: 0, far: 0, adopted: 0 }, // entry points hooked, by method
  hookTimes: {}, // module name -> [milliseconds spent hooking it, entry points hooked]
  patching: { stops: 0, threads: 0, unknown: 0, written: 0 }, // the stopped world's work, reported with the hooks
  events: [], // --events: per-call records not sent yet
  eventsDropped: 0,

  // Counters: one row of counterCap (per CPU, plus a shared row, when counting per CPU)
  counters: null, // base of the counter array
  countersAt: 0, // its address as a number, for the encoder
  counterCap: 0,
  counterUsed: 0,
  counterRows: 1,
  shmPath: null, // the shared counter file, when mapped
  detailShared: null, // {p, at, cap, reserved, reserve}: detail records in a shared file (openSharedDetail)
  detailPath: null, // that file's path, told to the host
  rseq: null, // {offset, cpus} when per-CPU counting is on

  // Memory of the agent's own
  keep: [], // Memory.alloc'd blocks are freed when their last JS handle goes: hold them for the process's life
  pool: null, // {base, used, cap} for thunks of pointers returned by cuGetProcAddress
  detailPool: null, // {base, used, cap}: detail records
  csPool: null, // {base, used, cap}: rseq descriptors, signatures and abort handlers (64 bytes each)
  restoreTable: null, // the fork handler's table of patched prologues whose thunks a child loses (installForkHandler)
  fork: null, // {p, log, length, cap}: what a forked child adopts (adoption.js), or null
  codeLent: false, // the module being hooked has its thunks in memory Frida frees in a forked child
  directPatches: [], // [address, original first bytes] of functions patched without the Interceptor
  pendingSpecials: [], // [address, first bytes before hooking] of hooks whose Interceptor commit is awaited
  dispatch: null, // the shared detail listener's code (setupDispatch), or null
  dispatchAt: 0, // its address as a number
  world: null, // {state, sig, patch}: stopping the world (setupWorld), or null
  writable: null, // {first, end, lo, hi, prot}: a module's code span made writable once for its scan (openSpan)

  // What the agent is doing
  seq: 0, // the next batch's number
  acked: -1, // the last batch the host confirmed
  scanning: 0, // id of the thread scanning modules, 0 when none
  loading: 0, // dlopen/LoadLibrary calls under way, all threads
  lateScan: false, // scanning inside a dlopen hook: patch prologues directly
  livePatching: false, // the program is running (attached, or after start-up): write jumps atomically
  rearming: false, // the agent's own dlopen that puts a failed load's message back (noteFailedLoad)
  exiting: false,
  flushTimer: null,

  // Made when first needed
  relocation: null, // {w, r}: one writer and relocator, reset for each function (creating them costs more)
  headTemplate: null, // the counting head every thunk starts with, and its addresses' places (headTemplate)
  atomics: null, // {copy8, cas16, scratch}: atomic prologue writers
  mayBranchFn: null,
  mmapFn: null, // libc's mmap (libcMmap)
  dlerrorFn: null,
  dlopenFn: null,
  dlinfoFn: null, // dlinfo, or false where the C library has none
  accessFn: null,
  getenvFn: null,
};
