import Foundation
import MoonwireCore
import Testing

/// Which shard a process is, from the command line or its engine's variables
/// (the variables as Slurm 22.05 and Kubernetes set them), and --start-at's times.
@Suite(.timeLimit(.minutes(5))) struct ShardSourcesTests {
    func shard(_ option: String? = nil, _ env: [String: String]) throws -> Shard? {
        try Shard.resolve(option: option, environment: env)
    }

    func error(_ option: String? = nil, _ env: [String: String]) -> String {
        do {
            let s = try Shard.resolve(option: option, environment: env)
            return "no error: \(String(describing: s))"
        } catch {
            return error.description
        }
    }

    @Test func explicitFirstThenEachEngine() throws {
        let everything = [
            "MW_SHARD": "3/5", "JOB_COMPLETION_INDEX": "1", "MW_SHARDS": "4", "SLURM_ARRAY_TASK_ID": "0",
            "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
        ]
        #expect(try shard("2/7", everything) == Shard(index: 2, count: 7))
        #expect(try shard(nil, everything) == Shard(index: 3, count: 5))
        #expect(try shard(nil, ["JOB_COMPLETION_INDEX": "3", "MW_SHARDS": "4"]) == Shard(index: 4, count: 4))
        #expect(try shard(nil, [:]) == nil)
    }

    @Test func kubernetesNeedsTheCount() {
        #expect(error(nil, ["JOB_COMPLETION_INDEX": "0"]).contains("MW_SHARDS is not"))
        #expect(error(nil, ["JOB_COMPLETION_INDEX": "4", "MW_SHARDS": "4"]) == "JOB_COMPLETION_INDEX 4 is not below MW_SHARDS 4: set MW_SHARDS to the Job's completions")
        #expect(error(nil, ["JOB_COMPLETION_INDEX": "x", "MW_SHARDS": "4"]).contains("is not a shard"))
    }

    @Test func slurmArrays() throws {
        // sbatch --array=0-3
        #expect(try shard(nil, ["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3", "SLURM_PROCID": "0"]) == Shard(index: 3, count: 4))
        // sbatch --array=3-7:2: tasks 3, 5, 7
        let stepped = ["SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_STEP": "2"]
        #expect(try shard(nil, stepped.merging(["SLURM_ARRAY_TASK_ID": "7"]) { $1 }) == Shard(index: 3, count: 3))
        #expect(error(nil, stepped.merging(["SLURM_ARRAY_TASK_ID": "4"]) { $1 }).contains("is not in the array"))
        #expect(error(nil, stepped.merging(["SLURM_ARRAY_TASK_ID": "9"]) { $1 }) == "SLURM_ARRAY_TASK_ID 9 is task 4 of the array from 3, but SLURM_ARRAY_TASK_COUNT is 3")
        // sbatch --array=1,3,10: no place for each ID.
        #expect(error(nil, ["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "10", "SLURM_ARRAY_TASK_STEP": "1"]).contains("not one range"))
        #expect(error(nil, ["SLURM_ARRAY_TASK_ID": "1"]).contains("SLURM_ARRAY_TASK_COUNT is not"))
        // Slurm's count wins; MW_SHARDS beside it must agree.
        #expect(error(nil, ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4", "MW_SHARDS": "3"]).contains("MW_SHARDS is '3' but Slurm runs 4 tasks"))
        #expect(try shard(nil, ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4", "MW_SHARDS": "4"]) == Shard(index: 2, count: 4))
    }

    @Test func slurmSteps() throws {
        // srun -n 4
        #expect(try shard(nil, ["SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4"]) == Shard(index: 4, count: 4))
        // The batch script of sbatch -n 4 (no step): not a split, whatever SLURM_NTASKS says.
        #expect(try shard(nil, ["SLURM_PROCID": "0", "SLURM_NTASKS": "4"]) == nil)
        // srun -n 1: not a split either.
        #expect(try shard(nil, ["SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"]) == nil)
        #expect(error(nil, ["SLURM_STEP_ID": "0", "SLURM_PROCID": "4", "SLURM_NTASKS": "4"]) == "SLURM_PROCID 4 is not below SLURM_NTASKS 4")
        // srun -n 2 in each task of --array=0-2: six shards.
        let both = ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"]
        #expect(try shard(nil, both) == Shard(index: 4, count: 6))
    }

    @Test func startTimes() throws {
        let now = 1_795_000_000.0  // 2026-11-18T11:06:40Z
        #expect(try StartAt.parse("+5s", now: now) == now + 5)
        #expect(try StartAt.parse("+250ms", now: now) == now + 0.25)
        #expect(try StartAt.parse("+2m", now: now) == now + 120)
        #expect(try StartAt.parse("1795000030", now: now) == 1_795_000_030)
        #expect(try StartAt.parse("@1795000030.5", now: now) == 1_795_000_030.5)
        let t = try StartAt.parse("2026-11-18T11:06:40Z", now: now)
        #expect(t == now)
        #expect(try StartAt.parse("2026-11-18T12:06:40.25+01:00", now: now) == now + 0.25)
        #expect(try StartAt.parse("2026-11-18 10:06:40-01:00", now: now) == now)
        #expect(try StartAt.parse("2026-11-18t11:06:45z", now: now) == now + 5)
        #expect(StartAt.format(now + 0.25) == "2026-11-18T11:06:40.250000Z")
        for bad in ["soon", "2026-11-18T08:26:40", "2026-13-18T08:26:40Z", "+5", "+-5s", "1795000000000", ""] {
            #expect(throws: StartAt.ParseError.self, "\(bad)") { try StartAt.parse(bad, now: now) }
        }
    }

    @Test func wholeRunsHaveEveryShardOnce() throws {
        func part(_ i: Int, _ n: Int) -> MetricsSnapshot { MetricsSnapshot(duration: 1, shards: [Shard(index: i, count: n)], metrics: []) }
        try MetricsSnapshot.checkWhole([part(2, 2), part(1, 2)], in: "d")
        #expect(throws: MetricsSnapshot.MergeError.self) { try MetricsSnapshot.checkWhole([part(1, 3), part(3, 3)], in: "d") }
        #expect(throws: MetricsSnapshot.MergeError.self) { try MetricsSnapshot.checkWhole([part(1, 2), part(1, 2), part(2, 2)], in: "d") }
        #expect(throws: MetricsSnapshot.MergeError.self) { try MetricsSnapshot.checkWhole([part(1, 2), part(2, 3)], in: "d") }
        #expect(MetricsSnapshot.isShardFileName(MetricsSnapshot.fileName(shard: Shard(index: 3, count: 12))))
        #expect(!MetricsSnapshot.isShardFileName("merged.json"))
        var a = part(1, 2)
        a.starts = [.init(shard: Shard(index: 1, count: 2), at: 100.25)]
        var b = part(2, 2)
        b.starts = [.init(shard: Shard(index: 2, count: 2), at: 100.5)]
        b.thresholds = ["iterations:count > 1.0"]
        let merged = try MetricsSnapshot.merge([b, a])
        #expect(merged.spreadOfStarts == 0.25)
        #expect(merged.starts?.map(\.shard?.index) == [1, 2])
        #expect(merged.thresholds == ["iterations:count > 1.0"])
        #expect(try Threshold(expression: "x:p99 < 123456789.125").expression == "x:p99 < 123456789.125")
    }
}
