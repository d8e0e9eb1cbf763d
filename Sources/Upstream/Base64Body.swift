import CBytes
import ConfabProtocol

extension Base64 {
    /// Appends the padded base64 of `bytes` to `out`: an image of megabytes goes into a request
    /// body in one pass of C over raw memory and one copy, never through a string of its own.
    static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        let count = (bytes.count + 2) / 3 * 4
        guard count > 0 else { return }
        let encoded = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = bytes.withUnsafeBufferPointer { input in
                cbytes_base64_encode(input.baseAddress, input.count, buffer.baseAddress)
            }
        }
        out.append(contentsOf: encoded)
    }
}
