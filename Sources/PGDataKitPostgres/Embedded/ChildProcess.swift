import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs helper programs with `posix_spawn` and `waitpid`.
///
/// Foundation's `Process` was seen on Linux to leave exited children as zombies and never
/// report their exit (`waitUntilExit()` hung); plain `waitpid` does not depend on run
/// loops or signal sources.
enum ChildProcess {
    /// What a finished program left behind.
    struct Outcome {
        var status: Int32
        var output: String
        var error: String
    }

    /// A started program whose output goes to temporary files.
    struct Running {
        let pid: pid_t
        let outputPath: String
        let errorPath: String

        /// Waits for the program and collects its output.
        func wait() throws -> Outcome {
            defer {
                unlink(outputPath)
                unlink(errorPath)
            }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 {
                guard errno == EINTR else {
                    throw EmbeddedPostgresError.fileSystem("waitpid: \(String(cString: strerror(errno)))")
                }
            }
            // WIFEXITED / WEXITSTATUS spelled out (they are macros); signals as 128 + n.
            let exitStatus: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            return Outcome(
                status: exitStatus,
                output: (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "",
                error: (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "")
        }
    }

    /// Starts a program with standard input from `/dev/null` and standard output and
    /// error in temporary files (a pipe could be held open by a daemon the program
    /// starts, such as the server `pg_ctl` launches).
    static func start(
        _ executable: String, _ arguments: [String], in directory: URL,
        environment: [String: String], mergeErrorIntoOutput: Bool = false
    ) throws -> Running {
        let base = FileManager.default.temporaryDirectory
            .appendingPathComponent("pgdatakit-child-\(UUID().uuidString)").path
        let outputPath = base + ".out"
        let errorPath = base + ".err"
        let output = try openForWriting(outputPath)
        defer { close(output) }
        let error = mergeErrorIntoOutput ? output : try openForWriting(errorPath)
        defer { if error != output { close(error) } }
        let pid = try spawn(
            executable, arguments, in: directory, environment: environment,
            outputDescriptor: output, errorDescriptor: error, newSession: false)
        return Running(pid: pid, outputPath: outputPath, errorPath: errorPath)
    }

    /// Runs a program to completion; standard error is merged into the output.
    static func run(
        _ executable: String, _ arguments: [String], in directory: URL,
        environment: [String: String]
    ) throws -> Outcome {
        try start(
            executable, arguments, in: directory, environment: environment,
            mergeErrorIntoOutput: true
        ).wait()
    }

    /// Starts a program in a session of its own (through `setsid`) with all output
    /// discarded, and does not wait for it.
    static func launchDetached(_ executable: String, _ arguments: [String], in directory: URL) throws {
        let nullDescriptor = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { if nullDescriptor >= 0 { close(nullDescriptor) } }
        _ = try spawn(
            executable, arguments, in: directory,
            environment: ProcessInfo.processInfo.environment, outputDescriptor: nullDescriptor,
            errorDescriptor: nullDescriptor, newSession: true)
    }

    private static func openForWriting(_ path: String) throws -> Int32 {
        let descriptor = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw EmbeddedPostgresError.fileSystem("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }

    private static func spawn(
        _ executable: String, _ arguments: [String], in directory: URL,
        environment: [String: String], outputDescriptor: Int32, errorDescriptor: Int32,
        newSession: Bool
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputDescriptor, 1)
        posix_spawn_file_actions_adddup2(&actions, errorDescriptor, 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)

        // `cd` in a shell first (posix_spawn's chdir action is a GNU extension Swift does
        // not see), then replace the shell with the program; `setsid` detaches.
        var program = [executable] + arguments
        if newSession, FileManager.default.isExecutableFile(atPath: "/usr/bin/setsid") {
            program = ["/usr/bin/setsid"] + program
        }
        let launcher = ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", directory.path] + program
        let argv = launcher.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw EmbeddedPostgresError.commandFailed(
                command: executable, status: -1, output: "cannot start: \(String(cString: strerror(result)))")
        }
        return pid
    }
}
