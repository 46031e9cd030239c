import CLua
import CLuaShim
import Logging
import MoonwireCore
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The metrics of one script run: the registry (one per runtime, touched only
/// on its loop), the built-in metrics and the thresholds the script declared.
///
/// Message and byte counts are not counted per message: they are read from
/// each connection's own statistics when a snapshot is taken, so metrics cost
/// nothing on the message path. Connection events (open, close, error) record
/// connect and recover times as they happen.
public final class RunMetrics {
    public let registry: MetricsRegistry
    /// Where the run's duration counts from: its start, or a later `--start-at`.
    private(set) var started = NIODeadline.now()
    /// The `--start-at` instant on this process's monotonic clock, if any.
    private(set) var startAt: NIODeadline?
    /// When the schedule of `mw.rate` or `mw.vus` actually began, wall clock (seconds since
    /// 1970): its first start's time less that start's place in the schedule.
    private(set) var loadStarted: Double?
    public internal(set) var thresholds: [Threshold] = []
    public var shard: Shard?

    let connectTime, recoverTime, requestLatency, expectLatency, pingRTT: MetricsRegistry.ID
    let connectDNS, connectTCP, connectTLS, connectHandshake: MetricsRegistry.ID
    let messagesIn, messagesOut, bytesIn, bytesOut, reconnects, dropped, refused, errors: MetricsRegistry.ID
    let connectionsOpen, queueDepth, bufferedBytes: MetricsRegistry.ID

    /// Totals of connections that ended, by the statistic's position in `totals(of:)`.
    private var retired = [Double](repeating: 0, count: 6)
    private var timing: [ObjectIdentifier: ConnectionTiming] = [:]

    struct ConnectionTiming {
        var dialed: NIODeadline
        var lost: NIODeadline?
        var open = false
        var counted: [Double]?
        var lastRTT: Double?
    }

    /// The built-in metrics: every run has them, so thresholds can name them.
    public static let builtInNames = [
        "connect_time", "connect_dns", "connect_tcp", "connect_tls", "connect_handshake", "recover_time", "request_latency",
        "expect_latency", "ping_rtt", "messages_in", "messages_out", "bytes_in", "bytes_out", "reconnects", "dropped", "refused",
        "errors", "connections_open", "queue_depth", "buffered_bytes",
    ]

    init() {
        let registry = MetricsRegistry()
        self.registry = registry
        func id(_ kind: MetricsRegistry.Kind, _ name: String) -> MetricsRegistry.ID {
            try! registry.register(kind, name: name)  // constant names, checked by the tests
        }
        connectTime = id(.histogram, "connect_time")
        connectDNS = id(.histogram, "connect_dns")
        connectTCP = id(.histogram, "connect_tcp")
        connectTLS = id(.histogram, "connect_tls")
        connectHandshake = id(.histogram, "connect_handshake")
        recoverTime = id(.histogram, "recover_time")
        requestLatency = id(.histogram, "request_latency")
        expectLatency = id(.histogram, "expect_latency")
        pingRTT = id(.histogram, "ping_rtt")
        messagesIn = id(.counter, "messages_in")
        messagesOut = id(.counter, "messages_out")
        bytesIn = id(.counter, "bytes_in")
        bytesOut = id(.counter, "bytes_out")
        reconnects = id(.counter, "reconnects")
        dropped = id(.counter, "dropped")
        refused = id(.counter, "refused")
        errors = id(.counter, "errors")
        connectionsOpen = id(.gauge, "connections_open")
        queueDepth = id(.gauge, "queue_depth")
        bufferedBytes = id(.gauge, "buffered_bytes")
    }

    private static func totals(of s: ManagedConnection.Stats) -> [Double] {
        [s.received, s.sent, s.bytesReceived, s.bytesSent, s.reconnects ?? 0, s.dropped].map(Double.init)
    }

    func dialing(_ c: LuaConnection) {
        timing[ObjectIdentifier(c)] = ConnectionTiming(dialed: .now())
    }

    /// Every dial that opened adds its steps (`timing`), reconnects included;
    /// `connect_time` counts once, from `mw.connect` to the first open.
    func opened(_ c: LuaConnection, timing steps: ConnectTiming?) {
        let now = NIODeadline.now()
        if let steps {
            registry.observe(connectDNS, Self.seconds(steps.dns))
            registry.observe(connectTCP, Self.seconds(steps.tcp))
            if let tls = steps.tls { registry.observe(connectTLS, Self.seconds(tls)) }
            if let handshake = steps.handshake { registry.observe(connectHandshake, Self.seconds(handshake)) }
        }
        guard var t = timing[ObjectIdentifier(c)] else { return }
        if let lost = t.lost {
            registry.observe(recoverTime, Self.seconds(now - lost))
            t.lost = nil
        } else if t.counted == nil, !t.open {
            registry.observe(connectTime, Self.seconds(now - t.dialed))
        }
        if !t.open { registry.change(connectionsOpen, by: 1) }
        t.open = true
        timing[ObjectIdentifier(c)] = t
    }

    func closed(_ c: LuaConnection, code: UInt16, willReconnect: Bool) {
        let key = ObjectIdentifier(c)
        let name = try? registry.register(.counter, name: "closes", tags: ["code": String(code)])
        if let name { registry.add(name) }
        guard var t = timing[key] else { return }
        let wasOpen = t.open
        if wasOpen { registry.change(connectionsOpen, by: -1) }
        t.open = false
        // The loss: recovered at the next open.
        if willReconnect, wasOpen, t.lost == nil { t.lost = .now() }
        timing[key] = t
    }

    func failed(_ c: LuaConnection) { registry.add(errors) }

    /// Closed for good: its totals move to the retired ones.
    func ended(_ c: LuaConnection) {
        let key = ObjectIdentifier(c)
        guard var t = timing[key], t.counted == nil else { return }
        let totals = Self.totals(of: c.connection.stats)
        for i in retired.indices { retired[i] += totals[i] }
        t.counted = totals
        t.lost = nil
        timing[key] = t
    }

    /// `c:reconnect()` after the end: its totals count as live again.
    func revived(_ c: LuaConnection) {
        let key = ObjectIdentifier(c)
        guard var t = timing[key], let counted = t.counted else { return }
        for i in retired.indices { retired[i] -= counted[i] }
        t.counted = nil
        t.lost = .now()
        timing[key] = t
    }

    /// Brings the counters read from the connections up to date.
    func refresh(live: [LuaConnection]) {
        var sums = retired
        var queued = 0.0
        var buffered = 0.0
        for c in live {
            let s = c.connection.stats
            let key = ObjectIdentifier(c)
            if timing[key]?.counted == nil {
                let totals = Self.totals(of: s)
                for i in sums.indices { sums[i] += totals[i] }
            }
            queued += Double(s.queued)
            buffered += Double(s.buffered)
            if let rtt = s.lastRTT, timing[key]?.lastRTT != rtt {
                timing[key]?.lastRTT = rtt
                registry.observe(pingRTT, rtt)
            }
        }
        // Ended connections leave the timing table once their totals are retired.
        for (key, t) in timing where t.counted != nil && !live.contains(where: { ObjectIdentifier($0) == key }) {
            timing[key] = nil
        }
        for (id, value) in zip([messagesIn, messagesOut, bytesIn, bytesOut, reconnects, dropped], sums) {
            registry.add(id, value - registry.value(id))
        }
        registry.set(queueDepth, queued)
        registry.set(bufferedBytes, buffered)
    }

    static func seconds(_ t: TimeAmount) -> Double { Double(t.nanoseconds) / 1e9 }

    var elapsed: Double { Swift.max(0, Self.seconds(.now() - started)) }

    /// `--start-at` (seconds since 1970): the instant on the monotonic clock, read
    /// against the wall clock once; the duration counts from it when it is ahead.
    func startRun(at wallClock: Double) {
        let ahead = wallClock - Self.wallClock()
        let deadline = NIODeadline.now() + .nanoseconds(Int64((ahead * 1e9).rounded()))
        startAt = deadline
        if deadline > started { started = deadline }
    }

    /// When a load model (`mw.rate`, `mw.vus`) begins, on the script's clock
    /// (`mw.now`): now, or the `--start-at` instant while it is ahead. Once past, a
    /// warning says by how much, once.
    func loadStart(clock: RuntimeClock, logger: Logger) -> Double {
        let now = clock.seconds
        guard let startAt, !clock.isVirtual else { return now }
        let target = Double(startAt.uptimeNanoseconds) / 1e9
        if target >= now { return target }
        if !warnedLate {
            warnedLate = true
            logger.warning("--start-at was \(String(format: "%.3f", now - target)) s past when the load began: it starts now, later than the other shards; give a later --start-at")
        }
        return now
    }

    private var warnedLate = false

    /// The first start of the load, `offset` seconds into its schedule: once.
    func loadBegan(offset: Double) {
        if loadStarted == nil { loadStarted = Self.wallClock() - offset }
    }

    static func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

extension ScriptRuntime {
    /// Everything recorded so far. On the loop.
    public func metricsSnapshot() -> MetricsSnapshot {
        metrics.refresh(live: Array(connections.values))
        var snapshot = metrics.registry.snapshot(duration: metrics.elapsed, shard: metrics.shard)
        if let at = metrics.loadStarted { snapshot.starts = [.init(shard: metrics.shard, at: at)] }
        return snapshot
    }

    static let metricsFunctions = LuaFunctions<ScriptRuntime>.functions(of: "mw", [
        LuaFunction("metric_register", shownAs: "mw.metrics", wrapped: true) { rt, args in
            let kinds: [String: MetricsRegistry.Kind] = ["counter": .counter, "gauge": .gauge, "histogram": .histogram]
            guard let kind = kinds[try args.string(1)] else { throw args.error(1, "counter, gauge or histogram expected") }
            let name = try args.string(2)
            var tags: [String: String] = [:]
            if !args.isNoneOrNil(3) {
                guard case .table(let table) = try args.value(3) else { throw args.typeError(3, expected: "table of tags") }
                for (k, v) in table {
                    guard case .string(let kb) = k else { throw args.error(3, "tag names are strings") }
                    let value: String
                    switch v {
                    case .string(let vb): value = String(decoding: vb, as: UTF8.self)
                    case .integer(let i): value = String(i)
                    case .number(let n): value = String(n)
                    case .boolean(let b): value = String(b)
                    default: throw args.error(3, "tag values are strings or numbers")
                    }
                    tags[String(decoding: kb, as: UTF8.self)] = value
                }
            }
            do {
                let id = try rt.metrics.registry.register(kind, name: name, tags: tags)
                args.lua.push(id.index)
                return 1
            } catch let error as MetricsRegistry.RegistrationError {
                throw LuaArgumentError("mw.metrics: " + error.description)
            }
        },
        LuaFunction("threshold", shownAs: "mw.thresholds", wrapped: true) { rt, args in
            do {
                rt.metrics.thresholds.append(try Threshold(key: try args.string(1), condition: try args.string(2)))
            } catch let error as Threshold.ParseError {
                throw LuaArgumentError("mw.thresholds: \(error.description)")
            }
            return 0
        },
    ])

    /// The methods of a metric (the prelude passes its id as `self`): `m:add(n)` is
    /// `metric_add(id, n)`, and n is argument #1.
    static let metricMethods = LuaFunctions<ScriptRuntime>.methods(of: "m", [
        LuaFunction("metric_add", shownAs: "m:add", wrapped: true) { rt, args in
            let id = try rt.metricID(args)
            let n = try args.optionalNumber(1) ?? 1
            guard n >= 0 else { throw args.error(1, "a counter only goes up; use a gauge for a value that goes down") }
            rt.metrics.registry.add(id, n)
            return 0
        },
        LuaFunction("metric_set", shownAs: "g:set", wrapped: true) { rt, args in
            rt.metrics.registry.set(try rt.metricID(args), try args.number(1))
            return 0
        },
        LuaFunction("metric_change", shownAs: "g:add", wrapped: true) { rt, args in
            rt.metrics.registry.change(try rt.metricID(args), by: try args.number(1))
            return 0
        },
        LuaFunction("metric_observe", shownAs: "h:observe", wrapped: true) { rt, args in
            let v = try args.number(1)
            guard v >= 0, v.isFinite else { throw args.error(1, "a histogram records values of 0 or more") }
            rt.metrics.registry.observe(try rt.metricID(args), v)
            return 0
        },
    ])

    private func metricID(_ args: LuaArguments) throws(LuaArgumentError) -> MetricsRegistry.ID {
        let i = try args.integer(0)
        guard (0..<metrics.registry.count).contains(i) else { throw args.error(0, "not a metric") }
        return metrics.registry.id(at: i)!
    }
}
