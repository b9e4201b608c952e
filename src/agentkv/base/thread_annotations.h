// Clang thread-safety annotations (-Wthread-safety), spelled AGENTKV_* like abseil's ABSL_*.
//
// They state which mutex guards a field and which locks a function needs, acquires or must not
// hold; Clang then checks every access at compile time. Other compilers see no-ops. This header
// holds only macros, so the pure core may include it without taking on threads or locks; the
// annotated mutex itself (agentkv::sync::Mutex) lives in the `sync` module, below `net` and
// `service`. See https://clang.llvm.org/docs/ThreadSafetyAnalysis.html for the attributes.
#ifndef AGENTKV_BASE_THREAD_ANNOTATIONS_H_
#define AGENTKV_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define AGENTKV_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define AGENTKV_THREAD_ANNOTATION_(x)
#endif

// On a class: its objects are a capability (a lock) named `x` in diagnostics.
#define AGENTKV_CAPABILITY(x) AGENTKV_THREAD_ANNOTATION_(capability(x))

// On an RAII class: it acquires a capability in its constructor and releases it in its
// destructor.
#define AGENTKV_SCOPED_CAPABILITY AGENTKV_THREAD_ANNOTATION_(scoped_lockable)

// On a field: reads need `x` held (shared or exclusive), writes need it held exclusively.
#define AGENTKV_GUARDED_BY(x) AGENTKV_THREAD_ANNOTATION_(guarded_by(x))

// On a pointer field: the pointee (not the pointer) is guarded by `x`.
#define AGENTKV_PT_GUARDED_BY(x) AGENTKV_THREAD_ANNOTATION_(pt_guarded_by(x))

// On a mutex field: it is always acquired after (before) the listed ones, so Clang can flag
// lock-order inversions.
#define AGENTKV_ACQUIRED_AFTER(...) AGENTKV_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define AGENTKV_ACQUIRED_BEFORE(...) AGENTKV_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))

// On a function: callers must hold the listed capabilities exclusively (shared).
#define AGENTKV_REQUIRES(...) AGENTKV_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define AGENTKV_REQUIRES_SHARED(...) \
  AGENTKV_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))

// On a function: it acquires (releases) the listed capabilities; with no argument, `this`.
#define AGENTKV_ACQUIRE(...) AGENTKV_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define AGENTKV_ACQUIRE_SHARED(...) \
  AGENTKV_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define AGENTKV_RELEASE(...) AGENTKV_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define AGENTKV_RELEASE_SHARED(...) \
  AGENTKV_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define AGENTKV_RELEASE_GENERIC(...) \
  AGENTKV_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))

// On a function: it tries to acquire; the first argument is the return value meaning success.
#define AGENTKV_TRY_ACQUIRE(...) AGENTKV_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))

// On a function: callers must not hold the listed capabilities (the function takes them).
#define AGENTKV_EXCLUDES(...) AGENTKV_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// On a function: it checks at run time that the capability is held, and the analysis assumes
// so afterwards.
#define AGENTKV_ASSERT_CAPABILITY(x) AGENTKV_THREAD_ANNOTATION_(assert_capability(x))

// On a function: it returns a reference to the named capability.
#define AGENTKV_RETURN_CAPABILITY(x) AGENTKV_THREAD_ANNOTATION_(lock_returned(x))

// On a function: the analysis skips its body. Each use says why the analysis cannot follow it.
#define AGENTKV_NO_THREAD_SAFETY_ANALYSIS AGENTKV_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // AGENTKV_BASE_THREAD_ANNOTATIONS_H_
