// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "PGDataKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PGDataKit", targets: ["PGDataKit"]),
        // The PostgreSQL client alone: connections, pool, values, errors, notifications
        // and the throwaway server, over libpq (`import PGDataKit` re-exports it).
        .library(name: "PGDataKitPostgres", targets: ["PGDataKitPostgres"]),
        // Commands a program embeds with its own model (`migrate`, `schema`): see
        // `CommandModel`. Apart, so the core library gains no dependency.
        .library(name: "PGDataKitCommands", targets: ["PGDataKitCommands"]),
        .executable(name: "pgdatakit", targets: ["pgdatakit"]),
        .executable(name: "pgdatakit-bench", targets: ["pgdatakit-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // Operational counters (saves, retries by cause, merges, latencies): see
        // `PGDataKitMetrics`.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        // `ContextManagerService`: a manager run as a swift-service-lifecycle `Service`
        // (graceful shutdown in a `ServiceGroup`).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Spans of saves, fetches, merges, controller refreshes and import batches: see
        // `PGDataKitTracing` (ServiceContext comes with it).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // `swift package generate-documentation` (the DocC catalog in Sources/PGDataKit).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The libpq layer: the only target that imports CLibPQ.
        .target(
            name: "PGDataKitPostgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
                // The pool's gauges and wait timer (`ConnectionPoolMetrics`).
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The object graph over it; what it needs of the layer below is `package` API.
        .target(
            name: "PGDataKit",
            dependencies: [
                "PGDataKitPostgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .target(
            name: "PGDataKitCommands",
            dependencies: [
                "PGDataKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "pgdatakit",
            dependencies: [
                "PGDataKit",
                "PGDataKitCommands",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The fetch benchmark's second floor: the same rows through libpq from C.
        .target(
            name: "CFetchFloor",
            dependencies: ["CLibPQ"],
            path: "Sources/CFetchFloor"
        ),
        .executableTarget(
            name: "pgdatakit-bench",
            dependencies: [
                "PGDataKit",
                "CFetchFloor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/pgdatakit-bench"
        ),
        .executableTarget(
            name: "pgdatakit-test-helper",
            dependencies: [
                "PGDataKit",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/pgdatakit-test-helper"
        ),
        .executableTarget(
            name: "pgdatakit-example",
            dependencies: ["PGDataKit"],
            path: "Sources/pgdatakit-example"
        ),
        .testTarget(
            name: "PGDataKitTests",
            dependencies: ["PGDataKit", "PGDataKitPostgres"]
        ),
        .testTarget(
            name: "PGDataKitIntegrationTests",
            dependencies: [
                "PGDataKit", "PGDataKitPostgres", "PGDataKitCommands", "pgdatakit", "pgdatakit-test-helper",
                "pgdatakit-bench", "pgdatakit-example",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
