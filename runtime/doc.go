// Package runtime is a Kopf-style handler runtime on client-go's dynamic
// client: plain functions registered for a resource and a cause (create,
// update, delete, resume, field change, timer, daemon), dispatched by shared
// informers and a rate-limited workqueue, with per-handler progress kept in
// a Storage chosen per resource: on the object (AnnotationStorage, the
// default) or in ConfigMaps the operator owns (ConfigMapStorage, for objects
// it must not or should not write).
//
// Register handlers on an Operator, then Run it:
//
//	op, _ := runtime.New(cfg, runtime.Settings{})
//	op.OnCreate(gvr, "expose", fn, runtime.Annotation("example.com/expose", "true"))
//	op.OnDelete(gvr, "cleanup", cleanup)            // holds a finalizer until done
//	op.Timer(gvr, "check", time.Minute, check)      // per object, while it exists
//	op.On(gvr, "sync", sync, runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate,
//		runtime.CauseResume, runtime.CauseEnqueue))  // one handler, several causes
//	op.Watch(secrets, "owners", mapToOwners)        // a Secret's change re-handles its owners
//	op.Every("sweep", 10*time.Minute, sweep)        // upkeep of no object, on the leader
//	err := op.Run(ctx)
//
// Registration errors (bad ids, paths, selectors, options, duplicates, a
// registration after Run started) are returned by the registering call and
// collected: Err returns them all, and Run refuses to start with them. So a
// caller may check each call or only Run.
//
// Re-handling other objects: Enqueue(resource, key, after) and Watch (a
// change of a watched object maps to keys to enqueue, as controller-runtime's
// Watches with a map function) put keys on the one workqueue. Handlers
// registered for CauseEnqueue run in the key's next cycle with the same
// progress records, retries, Temporary delays, metrics and Events as for the
// object's own changes; a fresh Enqueue cuts a pending retry delay of those
// handlers short.
//
// Old, new and diff: update and resume handlers registered WithDiff get the
// last handled and the current essence and their differences (Event.Old,
// New, Diff); OnField handlers the field's values, and with WithDiff the
// differences below it. Changes are detected from the essence's hash; the
// essence itself is kept as JSON in the object's last-handled record (its
// annotation, or its ConfigMap with ConfigMapStorage) only for objects with
// a WithDiff handler, and only up to MaxEssence (32 KiB): a bigger essence
// keeps just its hash, and Old and Diff are then nil. The record is written
// when a cycle finishes, so after a restart an update handler that was
// still retrying sees the same Old as before, and a resume handler compares
// with the essence last handled before the restart (an empty Diff unless
// the object changed while the operator was down).
//
// How it works, in three layers:
//   - Watching: one shared dynamic informer per resource, namespace and label
//     selector; a transform keeps each object as its JSON without
//     managedFields (a fifth or a sixth of its decoded size), so every read
//     decodes a copy of its own; a health check restarts a watch that lags
//     behind the server for WatchStallTimeout.
//   - Dispatch: one client-go rate-limited workqueue keyed by
//     resource/namespace/name with Settings.Workers workers; the queue never
//     hands one key to two workers, so one object's handlers run one at a time.
//   - Semantics: each cycle detects the causes from a compact last-handled
//     record (a hash plus watched field values), the finalizer and
//     deletionTimestamp, runs every due matching handler, then writes ONE
//     merge patch: progress annotations (<Prefix>/<id>, with
//     AnnotationStorage), results (<ResultsPath>.<id>), the handlers' own
//     Event.Patch and finalizer changes; state kept elsewhere is written
//     right after it. An object that matched and no longer matches any
//     handler loses the finalizer and its state. The one exception: an object that needs our finalizer (a
//     non-optional delete handler or a daemon matches it) gets it in a patch
//     of its own before its first handler runs, so that an object deleted
//     right after a create handler still reaches its delete handler.
//     Temporary and Permanent errors, Retries, Timeout and backoff control
//     retries; Events are posted through client-go's recorder. A write
//     whose outcome is unknown (a reset connection, a timeout, a 5xx) may
//     have landed while the cache still holds the copy from before it, so
//     the key's next cycle first reads the object from the API server and,
//     if the server is ahead of the cache, waits for the informer instead
//     of running handlers whose success the write recorded.
//     Objects no handler matches are never patched.
//
// Operating: optional Lease leader election (the Lease is released after a
// graceful shutdown for a fast hand-over; a replica that loses it cancels its
// handlers, stands by and campaigns again instead of exiting, and each term
// of leadership runs the startup and cleanup hooks), /healthz with probes, /readyz, Prometheus /metrics from the
// Operator's own registry, and a graceful shutdown bounded by
// Settings.ShutdownTimeout. Logs go through charmbracelet/log with the
// object's key on every line.
//
// It is a general-purpose library: it imports client-go, apimachinery,
// Prometheus and charmbracelet/log, and nothing of the operator built on
// it. Its names of its own (the annotation prefix, finalizer, field manager
// and Event component) are Settings whose defaults only are Tailplane's.
package runtime
