let M = null; // message names, from the host
let cfg = null;
let cm = null; // CModule with the detail listener
let nowNs = null;
// The detail record's layout is detail.c's (struct CtDetail), read from its cudatrace_detail_layout table once
// the CModule is built (readDetailLayout): defined once, in C.
let DETAIL_SIZE = 0;
let D_FIRST = 0, D_TIME = 0, D_CALLS = 0, D_N_CODES = 0, D_N_CALLERS = 0, D_CODES = 0, D_CODE_COUNTS = 0,
  D_OTHER_CODES = 0, D_CALLERS = 0, D_CALLER_COUNTS = 0, D_OTHER_CALLERS = 0;
let N_STATUSES = 0, N_CALLERS = 0;
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
let detailPool = null; // {base, used, cap}
let restoreTable = null;
let rseq = null; // {offset, cpus} when per-CPU counting is on
let counterRows = 1;
let csPool = null; // {base, used, cap}: rseq descriptors, signatures and abort handlers (64 bytes each)
let relocation = null; // {w, r}: one writer and relocator, reset for each function (creating them costs more)
let mayBranchFn = null;
let dispatch = null;
const directPatches = []; // [address, original first 5 bytes] of functions patched without the Interceptor
let atomics = null; // {copy8, cas16, scratch}
let world = null; // {state, sig, patch}
const patching = { stops: 0, threads: 0, unknown: 0, written: 0 }; // reported with the hooks
const pendingSpecials = []; // [address, first bytes before hooking] of special hooks made in a late scan
const hookTimes = {}; // module name -> [milliseconds spent hooking it, entry points hooked]
const loaderErrors = new Map(); // requested name + message -> {requested, message, count, t}
let dlerrorFn = null, dlopenFn = null, rearming = false;
let accessFn = null;
let getenvFn = null;
let acked = -1;
