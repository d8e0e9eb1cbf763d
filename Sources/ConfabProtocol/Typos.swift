/// "Did you mean" for the config's keys and the client's commands: one distance for both.
public enum Typos {
    /// The candidate nearest to `key` by edits (insert, delete, change, or swap two neighbours),
    /// if it is near enough to be a typo: one edit for keys of up to four characters, two for
    /// longer ones. Case does not count. Ties go to the first in order.
    public static func closest(to key: String, among candidates: [String]) -> String? {
        let limit = key.count <= 4 ? 1 : 2
        var best: (key: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(Array(key.lowercased()), Array(candidate.lowercased()))
            if distance <= limit, distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        return best?.key
    }

    /// Damerau-Levenshtein distance, restricted to swaps of neighbours (optimal string
    /// alignment): insertions, deletions, substitutions and swaps each count one.
    public static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var rows = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { rows[i][0] = i }
        for j in 0...b.count { rows[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1) }
            }
        }
        return rows[a.count][b.count]
    }
}
