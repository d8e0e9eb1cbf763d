#if canImport(Glibc)
import Glibc
#endif

public enum ProcessEnvironment {
    /// Every `NAME=value` of this process's environment; the first of a repeated name wins,
    /// as with getenv(3).
    public static func current() -> [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "="), result[String(text[..<equals])] == nil {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return result
    }
}
