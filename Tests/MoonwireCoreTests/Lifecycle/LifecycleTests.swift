import Testing

/// Groups the suites of `Sources/MoonwireCore/Lifecycle`, so that
/// `swift test --filter Lifecycle` runs them all.
@Suite(.timeLimit(.minutes(5))) enum LifecycleTests {}
