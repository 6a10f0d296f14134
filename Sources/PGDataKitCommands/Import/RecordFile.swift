import Foundation
import PGDataKit
import Synchronization

/// The records of a JSON file, read in chunks so that a file of any size is never in
/// memory at once: a JSON array of objects (`[{…}, {…}]`), or JSON lines (one object per
/// line, blank lines skipped). The format is told by the first character that is not
/// white space.
///
/// A sequence cannot throw, so a record that is not a JSON object, or text that is not
/// JSON, ends the sequence early: the problem is kept in `state.problem` and the
/// state's problem handler is called before the sequence ends (the import command
/// cancels the import there, so the batch holding the bad record is rolled back).
struct RecordFile: Sequence, Sendable {
    enum Format: String, Sendable {
        case array = "JSON array"
        case lines = "JSON lines"
    }

    /// Why reading stopped early.
    struct Problem: Error, Sendable, CustomStringConvertible {
        /// The record's index, counted from 0 (as `ImportError` counts).
        let recordIndex: Int
        /// The line the record starts on, counted from 1.
        let line: Int
        let reason: String

        var description: String { "record \(recordIndex) (line \(line)): \(reason)" }
    }

    /// How far reading got, shared with the progress display.
    final class State: Sendable {
        private let consumed = Atomic<Int>(0)
        private let found = Mutex<Problem?>(nil)
        private let handler = Mutex<(@Sendable () -> Void)?>(nil)

        /// Bytes of the file read so far.
        var bytesRead: Int { consumed.load(ordering: .relaxed) }
        var problem: Problem? { found.withLock { $0 } }

        fileprivate func advance(to offset: Int) { consumed.store(offset, ordering: .relaxed) }
        /// Sets what to do, on the reading thread, when reading stops at a problem.
        func onProblem(_ action: @escaping @Sendable () -> Void) { handler.withLock { $0 = action } }

        fileprivate func fail(_ problem: Problem) {
            found.withLock { $0 = $0 ?? problem }
            handler.withLock { $0 }?()
        }
    }

    /// Records nested deeper than this are refused (the parser recurses).
    static let maximumDepth = 256
    /// A record longer than this is refused instead of growing the buffer without end.
    static let maximumRecordBytes = 64 << 20

    let path: String
    let format: Format
    let size: Int
    let state = State()

    /// Opens `path` to learn its format and size.
    ///
    /// - Throws: `RecordFileError` when the file cannot be read, is empty, or starts
    ///   with something other than `[` or `{`.
    init(path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw RecordFileError.unreadable(path) }
        defer { try? handle.close() }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        var first: UInt8?
        while first == nil {
            guard let chunk = try? handle.read(upToCount: 4096) else { throw RecordFileError.unreadable(path) }
            if chunk.isEmpty { break }
            first = chunk.first { !Self.isWhitespace($0) }
        }
        switch first {
        case UInt8(ascii: "["): format = .array
        case UInt8(ascii: "{"): format = .lines
        case nil: throw RecordFileError.empty(path)
        default: throw RecordFileError.notRecords(path)
        }
        self.path = path
        self.size = size
    }

    func makeIterator() -> Iterator { Iterator(file: self) }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    /// Reads chunks and cuts them into records.
    struct Iterator: IteratorProtocol {
        private let file: RecordFile
        private var handle: FileHandle?
        private var buffer: [UInt8] = []
        private var position = 0
        /// The file offset of `buffer[0]`.
        private var bufferOffset = 0
        private var endOfFile = false
        private var finished = false
        private var line = 1
        private var index = 0
        private var openedArray = false
        private var scanFailure = ""
        private let decoder = JSONDecoder()

        init(file: RecordFile) {
            self.file = file
            self.handle = FileHandle(forReadingAtPath: file.path)
            if handle == nil { _ = fail("the file could not be opened again") }
        }

        /// The line the last record read starts on.
        private(set) var lastRecordLine = 0

        mutating func next() -> JSONValue? {
            guard !finished else { return nil }
            compact()
            switch file.format {
            case .lines: return nextLine()
            case .array: return nextElement()
            }
        }

        // MARK: JSON lines

        private mutating func nextLine() -> JSONValue? {
            while true {
                skip { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
                guard let byte = peek() else { return finish() }
                if byte == 0x0A {
                    position += 1
                    line += 1
                    continue
                }
                let start = position
                guard let end = scan(until: { $0 == 0x0A }, stopAtEndOfFile: true) else { return fail(scanFailure, line: line) }
                position = Swift.min(end + 1, buffer.count)
                line += 1
                return decode(start..<end, line: line - 1)
            }
        }

        // MARK: JSON array

        private mutating func nextElement() -> JSONValue? {
            skipWhitespace()
            if !openedArray {
                guard peek() == UInt8(ascii: "[") else { return fail("the file does not start with [") }
                position += 1
                openedArray = true
                skipWhitespace()
                if peek() == UInt8(ascii: "]") {
                    position += 1
                    return finishArray()
                }
            } else {
                switch peek() {
                case UInt8(ascii: ","):
                    position += 1
                    skipWhitespace()
                case UInt8(ascii: "]"):
                    position += 1
                    return finishArray()
                case nil:
                    return fail("the array is not closed with ]")
                default:
                    return fail("records must be separated by commas")
                }
            }
            let start = position
            var depth = 0
            var inString = false
            var escaped = false
            var tooDeep = false
            let startLine = line
            guard let end = scan(until: { byte in
                if inString {
                    if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                    return false
                }
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if depth > RecordFile.maximumDepth { tooDeep = true }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 { return true }  // the array's own ]
                    depth -= 1
                case UInt8(ascii: ","): return depth == 0
                default: break
                }
                return tooDeep
            }, stopAtEndOfFile: false, countingLines: true) else { return fail(scanFailure, line: startLine) }
            if tooDeep { return fail("nested deeper than \(RecordFile.maximumDepth) levels", line: startLine) }
            position = end
            return decode(start..<end, line: startLine)
        }

        private mutating func finishArray() -> JSONValue? {
            skipWhitespace()
            guard peek() == nil else { return fail("there is more after the array's closing ]") }
            return finish()
        }

        // MARK: Buffer

        /// Decodes one record, which must be a JSON object.
        private mutating func decode(_ range: Range<Int>, line recordLine: Int) -> JSONValue? {
            let bytes = buffer[range]
            guard let value = try? decoder.decode(JSONValue.self, from: Data(bytes)) else {
                return fail("not valid JSON", line: recordLine)
            }
            guard case .object = value else { return fail("not a JSON object", line: recordLine) }
            index += 1
            lastRecordLine = recordLine
            file.state.advance(to: bufferOffset + range.upperBound)
            return value
        }

        /// Advances `position` to the first byte for which `stop` holds and returns its
        /// index (reading more as needed); at the end of the file returns the end when
        /// `stopAtEndOfFile`. Returns `nil` with the reason in `scanFailure` for a record
        /// that is too long or not ended. `position` is left at the start.
        private mutating func scan(
            until stop: (UInt8) -> Bool, stopAtEndOfFile: Bool, countingLines: Bool = false
        ) -> Int? {
            var cursor = position
            while true {
                while cursor < buffer.count {
                    let byte = buffer[cursor]
                    if stop(byte) { return cursor }
                    if countingLines, byte == 0x0A { line += 1 }
                    cursor += 1
                }
                if cursor - position > RecordFile.maximumRecordBytes {
                    scanFailure = "longer than \(RecordFile.maximumRecordBytes >> 20) MiB"
                    return nil
                }
                guard fill() else {
                    if stopAtEndOfFile { return cursor }
                    scanFailure = "the file ends inside a record (the array is not closed)"
                    return nil
                }
            }
        }

        private mutating func skipWhitespace() {
            skip(countingLines: true, RecordFile.isWhitespace)
        }

        private mutating func skip(countingLines: Bool = false, _ predicate: (UInt8) -> Bool) {
            while true {
                while position < buffer.count, predicate(buffer[position]) {
                    if countingLines, buffer[position] == 0x0A { line += 1 }
                    position += 1
                }
                if position < buffer.count || !fill() { return }
            }
        }

        private mutating func peek() -> UInt8? {
            if position >= buffer.count, !fill() { return nil }
            return buffer[position]
        }

        /// Appends the next chunk; `false` at the end of the file.
        private mutating func fill() -> Bool {
            guard !endOfFile, let handle else { return false }
            guard let chunk = try? handle.read(upToCount: 1 << 16), !chunk.isEmpty else {
                endOfFile = true
                try? handle.close()
                return false
            }
            buffer.append(contentsOf: chunk)
            return true
        }

        /// Drops the bytes before `position` once they are a good part of the buffer.
        private mutating func compact() {
            guard position > 1 << 16, position * 2 > buffer.count else { return }
            buffer.removeFirst(position)
            bufferOffset += position
            position = 0
        }

        private mutating func finish() -> JSONValue? {
            finished = true
            file.state.advance(to: file.size)
            return nil
        }

        private mutating func fail(_ reason: String, line problemLine: Int? = nil) -> JSONValue? {
            finished = true
            file.state.fail(Problem(recordIndex: index, line: problemLine ?? line, reason: reason))
            return nil
        }
    }
}

/// The input file of `pgdatakit import` cannot be used.
enum RecordFileError: Error, CustomStringConvertible {
    case unreadable(String)
    case empty(String)
    case notRecords(String)

    var description: String {
        switch self {
        case .unreadable(let path): return "\(path): cannot be read"
        case .empty(let path): return "\(path): the file is empty"
        case .notRecords(let path): return "\(path): neither a JSON array nor JSON lines (it must start with [ or {)"
        }
    }
}
