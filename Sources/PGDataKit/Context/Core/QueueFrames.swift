import Foundation

/// The contexts whose queue blocks the current thread is running, innermost last: a
/// thread-local chain of frames on the thread's stack, one per `perform` or
/// `performAndWait` block.
///
/// A thread that runs a block of a parent context and, inside it, `performAndWait` of a
/// child context runs the child's block itself (`DispatchQueue.sync` runs a block on the
/// calling thread). When the child then reads from or saves into its parent, the parent's
/// queue is held by this very thread, one frame down: waiting for it would never end, and
/// running the parent's work directly is safe (the serial queue runs nothing else
/// meanwhile). `ManagedObjectContext.isOnQueue` asks here after the queue's own key.
enum QueueFrames {
    private struct Frame {
        let context: ObjectIdentifier
        // Unsafe: the frame of an enclosing `run` on this thread, further down its stack:
        // alive for as long as this frame is.
        let previous: UnsafeMutableRawPointer?
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `body` with a frame for `context` on the current thread's chain.
    static func run<T>(in context: AnyObject, _ body: () throws -> T) rethrows -> T {
        var frame = Frame(context: ObjectIdentifier(context), previous: pthread_getspecific(key))
        // Unsafe: the pointer is in the thread's slot only while the closure runs (the
        // `defer` puts the previous frame back on return and on throw), `body` cannot suspend
        // and move to another thread, and only this thread reads its slot.
        return try withUnsafeMutablePointer(to: &frame) { pointer in
            pthread_setspecific(key, pointer)
            defer { pthread_setspecific(key, pointer.pointee.previous) }
            return try body()
        }
    }

    /// Whether the current thread runs, somewhere down its stack, a block of `context`'s
    /// queue.
    static func contains(_ context: AnyObject) -> Bool {
        let id = ObjectIdentifier(context)
        var current = pthread_getspecific(key)
        while let raw = current {
            // Unsafe: each pointer on the chain is a live `Frame` (bound by `run`) of a
            // `run` further down this thread's stack.
            let frame = raw.assumingMemoryBound(to: Frame.self).pointee
            if frame.context == id { return true }
            current = frame.previous
        }
        return false
    }
}
