// swift-tools-version:6.2
// Side-by-side comparisons kept out of the main package (their dependencies take minutes
// to build): PGDataKit's insertOrUpdate against SQLKit's raw INSERT … ON CONFLICT and
// against Fluent's model API, on the same server, batch by batch. Run it with
// `scripts/compare`.
import Foundation
import PackageDescription

// The PGDataKit package is the repository this folder sits in; a path dependency is
// named by its folder.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

let package = Package(
    name: "Compare",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: root.path),
        .package(url: "https://github.com/vapor/postgres-kit.git", exact: "2.17.0"),
        .package(url: "https://github.com/vapor/fluent-kit.git", exact: "1.57.0"),
        .package(url: "https://github.com/vapor/fluent-postgres-driver.git", exact: "2.14.0"),
    ],
    targets: [
        .executableTarget(
            name: "compare",
            dependencies: [
                .product(name: "PGDataKit", package: root.lastPathComponent.lowercased()),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "FluentKit", package: "fluent-kit"),
                .product(name: "FluentPostgresDriver", package: "fluent-postgres-driver"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
