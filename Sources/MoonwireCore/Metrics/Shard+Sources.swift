/// Where a process learns which shard of a run it is: the command line, or
/// the variables its engine sets (docs/scaling.md).
extension Shard {
    /// Why the shard given, or the engine's variables, name no shard.
    public struct SourceError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The shard, first found:
    /// 1. `option`: `--shard I/N`;
    /// 2. `MW_SHARD=I/N`;
    /// 3. a Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` (from 0), the count from
    ///    `MW_SHARDS` (Kubernetes does not give a pod its Job's completions);
    /// 4. Slurm: a job array's `SLURM_ARRAY_TASK_ID` (from `SLURM_ARRAY_TASK_MIN`, by
    ///    `SLURM_ARRAY_TASK_STEP`) of `SLURM_ARRAY_TASK_COUNT`, and/or an `srun` step's
    ///    `SLURM_PROCID` of `SLURM_NTASKS`; both at once (srun -n M in each task of an
    ///    array of N) make N × M shards.
    ///
    /// Slurm's counts win; `MW_SHARDS` set beside them must agree. An `srun` step of
    /// one task, and a batch script itself (no `SLURM_STEP_ID`, where Slurm still sets
    /// `SLURM_PROCID` 0 and the allocation's `SLURM_NTASKS`), are no split: nil.
    ///
    /// ```swift
    /// let env = ["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"]
    /// try Shard.resolve(option: nil, environment: env)    // 3/4
    /// try Shard.resolve(option: "1/2", environment: env)  // 1/2: the option first
    /// ```
    public static func resolve(option: String?, environment env: [String: String]) throws(SourceError) -> Shard? {
        if let text = option ?? env["MW_SHARD"] {
            let from = option != nil ? "--shard" : "MW_SHARD"
            guard let parsed = parse(text) else {
                throw SourceError(description: "\(from) '\(text)' is not a shard: write I/N with 1 <= I <= N, such as 2/4")
            }
            return parsed
        }
        if let index = env["JOB_COMPLETION_INDEX"] {
            guard let count = env["MW_SHARDS"] else {
                throw SourceError(description: "JOB_COMPLETION_INDEX is set but MW_SHARDS is not: set MW_SHARDS to the Job's completions")
            }
            guard let i = Int(index), let n = Int(count), n >= 1, i >= 0 else {
                throw SourceError(description: "JOB_COMPLETION_INDEX '\(index)' with MW_SHARDS '\(count)' is not a shard: the index counts from 0 to MW_SHARDS - 1")
            }
            guard i < n else {
                throw SourceError(description: "JOB_COMPLETION_INDEX \(i) is not below MW_SHARDS \(n): set MW_SHARDS to the Job's completions")
            }
            return Shard(index: i + 1, count: n)
        }
        let array = try arrayTask(env)
        let step = try srunTask(env)
        let slurm: Shard
        switch (array, step) {
        case (nil, nil): return nil
        case (let a?, nil): slurm = a
        case (nil, let s?): slurm = s
        case (let a?, let s?):
            slurm = Shard(index: (a.index - 1) * s.count + s.index, count: a.count * s.count)
        }
        if let text = env["MW_SHARDS"], Int(text) != slurm.count {
            throw SourceError(description: "MW_SHARDS is '\(text)' but Slurm runs \(slurm.count) tasks (\(array != nil ? "SLURM_ARRAY_TASK_COUNT" : "SLURM_NTASKS")): unset MW_SHARDS, Slurm's count is used")
        }
        return slurm
    }

    /// A job array's task (`sbatch --array=A-B[:S]`): its place in the range of task IDs.
    private static func arrayTask(_ env: [String: String]) throws(SourceError) -> Shard? {
        guard env["SLURM_ARRAY_TASK_ID"] != nil else { return nil }
        func number(_ name: String, default value: Int? = nil) throws(SourceError) -> Int {
            guard let text = env[name] else {
                if let value { return value }
                throw SourceError(description: "SLURM_ARRAY_TASK_ID is set but \(name) is not: set MW_SHARD=I/N for this Slurm")
            }
            guard let n = Int(text) else { throw SourceError(description: "\(name) '\(text)' is not a number") }
            return n
        }
        let id = try number("SLURM_ARRAY_TASK_ID")
        let count = try number("SLURM_ARRAY_TASK_COUNT")
        let min = try number("SLURM_ARRAY_TASK_MIN", default: 0)
        let stride = try number("SLURM_ARRAY_TASK_STEP", default: 1)
        guard count >= 1, stride >= 1 else {
            throw SourceError(description: "SLURM_ARRAY_TASK_COUNT \(count) with SLURM_ARRAY_TASK_STEP \(stride) is not an array of tasks")
        }
        // An array given as a list (--array=1,3,10) has no place for each ID.
        if let max = env["SLURM_ARRAY_TASK_MAX"].flatMap(Int.init), max != min + (count - 1) * stride {
            throw SourceError(description: "the job array's task IDs (\(min) to \(max), \(count) tasks) are not one range: submit --array=0-\(count - 1), or set MW_SHARD=I/N in each task")
        }
        let offset = id - min
        guard offset >= 0, offset % stride == 0 else {
            throw SourceError(description: "SLURM_ARRAY_TASK_ID \(id) is not in the array from SLURM_ARRAY_TASK_MIN \(min) by SLURM_ARRAY_TASK_STEP \(stride)")
        }
        let index = offset / stride
        guard index < count else {
            throw SourceError(description: "SLURM_ARRAY_TASK_ID \(id) is task \(index + 1) of the array from \(min), but SLURM_ARRAY_TASK_COUNT is \(count)")
        }
        return Shard(index: index + 1, count: count)
    }

    /// A task of an `srun` step of more than one task.
    private static func srunTask(_ env: [String: String]) throws(SourceError) -> Shard? {
        guard env["SLURM_STEP_ID"] != nil, let procText = env["SLURM_PROCID"], let tasksText = env["SLURM_NTASKS"] else { return nil }
        guard let proc = Int(procText), let tasks = Int(tasksText), tasks >= 1, proc >= 0 else {
            throw SourceError(description: "SLURM_PROCID '\(procText)' with SLURM_NTASKS '\(tasksText)' is not a task of a step")
        }
        guard proc < tasks else {
            throw SourceError(description: "SLURM_PROCID \(proc) is not below SLURM_NTASKS \(tasks)")
        }
        return tasks > 1 ? Shard(index: proc + 1, count: tasks) : nil
    }
}
