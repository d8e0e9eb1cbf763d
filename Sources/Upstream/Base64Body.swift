import CBytes
import ConfabProtocol

extension Base64 {
    /// The padded base64 of `bytes` as UTF-8 bytes, ready to be copied into a request body: an
    /// image of megabytes is encoded in one pass of C over raw memory, never through a string.
    public static func bytes(of bytes: [UInt8]) -> [UInt8] {
        let count = (bytes.count + 2) / 3 * 4
        guard count > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = bytes.withUnsafeBufferPointer { input in
                cbytes_base64_encode(input.baseAddress, input.count, buffer.baseAddress)
            }
        }
    }
}
