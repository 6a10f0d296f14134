import Foundation

/// Writes a line to standard error.
func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Writes a line to standard output at once (`print` buffers when output is a pipe or a
/// file, so a reader would see nothing until exit).
func printLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
