// swift-tools-version:6.2
import PackageDescription

// PGDataKit inside a Hummingbird 2 server: a private context per request, an import
// endpoint, remote changes as server-sent events, and graceful shutdown in a
// ServiceGroup. See README.md beside this file.
let package = Package(
    name: "HummingbirdServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        // Named: a path dependency is known by its folder's name otherwise.
        .package(name: "PGDataKit", path: "../.."),
        // No default traits: the example needs neither swift-configuration nor the full
        // Foundation extras, and builds faster without them.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "HummingbirdServer",
            dependencies: [
                .product(name: "PGDataKit", package: "PGDataKit"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
