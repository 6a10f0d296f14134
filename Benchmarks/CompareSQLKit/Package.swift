// swift-tools-version:6.1
// A side-by-side comparison kept out of the main package (its dependencies take minutes
// to build): PGDataKit's insertOrUpdate against SQLKit's raw INSERT … ON CONFLICT, on
// the same server, batch by batch. Run it with `scripts/compare-sqlkit`.
import Foundation
import PackageDescription

// The PGDataKit package is the repository this folder sits in; a path dependency is
// named by its folder.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

let package = Package(
    name: "CompareSQLKit",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: root.path),
        .package(url: "https://github.com/vapor/postgres-kit.git", exact: "2.17.0"),
    ],
    targets: [
        .executableTarget(
            name: "compare-sqlkit",
            dependencies: [
                .product(name: "PGDataKit", package: root.lastPathComponent.lowercased()),
                .product(name: "PostgresKit", package: "postgres-kit"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
