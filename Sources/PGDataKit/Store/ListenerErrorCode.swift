/// `ChangeListenerError`'s code matches in `catch` like every other error code
/// (`catch ChangeListenerError.Code.notificationsNotDelivered { … }`).
///
/// The conformance sits here because `ChangeListenerError.swift` belongs to the listener
/// work under way; once that file declares `Code: ErrorCode` itself (and backs it with an
/// internal enum, as the other codes are), this file goes.
extension ChangeListenerError.Code: ErrorCode {}
