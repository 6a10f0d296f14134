import Foundation
import PGDataKit
import Testing

/// TLS settings in a URL (`sslmode`, `sslrootcert`) reach libpq unchanged, for single
/// connections and for everything a context manager opens (pool and change listener).
/// A throwaway server of its own is started with a self-signed certificate for
/// `localhost` / `127.0.0.1`, made with the `openssl` command.
@Suite struct TLSTests {
    @Test func requireAndVerifyFullConnectOverTLS() throws {
        try TLSServer.with { server in
            for query in ["sslmode=require", "sslmode=verify-full&sslrootcert=\(server.certificate)"] {
                let connection = try Connection(ConnectionConfiguration(server.url + "?" + query))
                defer { connection.close() }
                let encrypted = try connection.query(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0].decode(Bool.self, at: 0)
                #expect(encrypted, "\(query) should give an encrypted connection")
            }
            // Without a setting libpq prefers TLS, and `disable` really turns it off.
            let plain = try Connection(ConnectionConfiguration(server.url + "?sslmode=disable"))
            defer { plain.close() }
            let encrypted = try plain.query(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0].decode(Bool.self, at: 0)
            #expect(!encrypted)
        }
    }

    @Test func verifyFullRefusesAnUnknownCertificateWithoutShowingThePassword() throws {
        try TLSServer.with { server in
            // A root certificate that did not sign the server's: verification must fail.
            let other = try TLSServer.makeCertificate(in: server.directory, name: "other")
            let password = "tls-secret-\(UUID().uuidString.prefix(8))"
            let url = server.url.replacingOccurrences(of: "postgres@", with: "postgres:\(password)@")
                + "?sslmode=verify-full&sslrootcert=\(other)"
            do {
                let connection = try Connection(ConnectionConfiguration(url))
                connection.close()
                Issue.record("connected although the certificate is not trusted")
            } catch let error as PostgresError {
                #expect(error.kind == .connectionFailed)
                #expect(String(describing: error).contains("certificate"), "\(error)")
                for text in [String(describing: error), String(reflecting: error), error.message] {
                    #expect(!text.contains(password))
                }
            }
        }
    }

    @Test func aContextManagerSavesAndMergesOverTLS() throws {
        try TLSServer.with { server in
            let configuration = ConnectionConfiguration(
                server.url + "?sslmode=verify-full&sslrootcert=\(server.certificate)")
            let connection = try Connection(configuration)
            try Migrator(directory: TestDatabase.repositoryRoot.appendingPathComponent("migrations"))
                .migrate(on: connection)
            connection.close()
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "tls"
                user.name = "Over TLS"
                try context.save()
            }
            let names = try manager.mainContext.performAndWait {
                try manager.mainContext.fetchAll(User.self).map { $0.name ?? "" }
            }
            #expect(names == ["Over TLS"])
            let unencrypted = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SELECT count(*) FROM pg_stat_ssl WHERE NOT ssl AND pid IN "
                    + "(SELECT pid FROM pg_stat_activity WHERE datname = current_database())")[0]
                    .decode(Int.self, at: 0)
            }
            #expect(unencrypted == 0, "the pool and the listener connect with the URL's TLS settings")
        }
    }
}

/// A throwaway server with `ssl = on` and a fresh self-signed certificate.
private struct TLSServer {
    let url: String
    let directory: URL
    /// Path of the server's certificate (its own root: self-signed).
    let certificate: String

    static func with(_ body: (TLSServer) throws -> Void) throws {
        try TestDatabase.withTemporaryDirectory { directory in
            _ = chmod(directory.path, 0o755)
            let certificate = try makeCertificate(in: directory, name: "server")
            let key = directory.appendingPathComponent("server.key").path
            if geteuid() == 0 {
                // The server runs as the unprivileged account and must own its key.
                guard let account = getpwnam(EmbeddedPostgres.Options().unprivilegedUser) else {
                    Issue.record("no unprivileged account for the server")
                    return
                }
                for path in [certificate, key] {
                    #expect(chown(path, account.pointee.pw_uid, account.pointee.pw_gid) == 0)
                }
            }
            let server = try EmbeddedPostgres.start(EmbeddedPostgres.Options(settings: [
                "ssl": "on", "ssl_cert_file": "'\(certificate)'", "ssl_key_file": "'\(key)'",
            ]))
            defer { try? server.stop() }
            try body(TLSServer(url: server.url, directory: directory, certificate: certificate))
        }
    }

    /// Writes `NAME.crt` and `NAME.key` (mode 0600) for `localhost` and `127.0.0.1`;
    /// returns the certificate's path.
    static func makeCertificate(in directory: URL, name: String) throws -> String {
        let certificate = directory.appendingPathComponent("\(name).crt").path
        let key = directory.appendingPathComponent("\(name).key").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", key, "-out", certificate,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl req failed")
        _ = chmod(key, 0o600)
        return certificate
    }
}
