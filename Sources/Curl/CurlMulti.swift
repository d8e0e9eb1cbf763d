import CCurl
import EventLoop
#if canImport(Glibc)
import Glibc
#endif

/// How a transfer ended, in libcurl's words.
public struct CurlOutcome: Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public var isSuccess: Bool { code == Int32(CURLE_OK.rawValue) }
    public var isTimeout: Bool { code == Int32(CURLE_OPERATION_TIMEDOUT.rawValue) }
    /// The connection never got going: refused, DNS, TLS, proxy.
    public var isConnectFailure: Bool {
        [CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_SSL_CONNECT_ERROR,
         CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT]
            .contains { $0.rawValue == UInt32(code) }
    }
    public var description: String { message }
}

/// One HTTP request on a `CurlMulti`. Body bytes are handed over as they arrive.
public final class CurlTransfer {
    /// Nil when libcurl could not be loaded.
    private let handle: UnsafeMutableRawPointer?
    /// Only for a transfer that has one (see `start`).
    var easy: UnsafeMutableRawPointer { handle! }
    var hasEasyHandle: Bool { handle != nil }
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// Called with the response body received since the last call, on the loop after curl
    /// has returned (never inside curl); return false to cancel the transfer there and then.
    public var onData: ((UnsafeRawBufferPointer) -> Bool)?
    /// Called once when the transfer ends by itself (never after `CurlMulti.cancel`).
    public var onComplete: ((CurlOutcome) -> Void)?
    fileprivate var abortRequested = false
    fileprivate weak var multi: CurlMulti?
    /// Body bytes curl handed over during the current `curl_multi_socket_action`, delivered
    /// to `onData` once it has returned.
    fileprivate var received: [UInt8] = []

    /// A POST with `body`, or a GET when it is nil. `stallSeconds`: abort when less than one byte
    /// arrives for that long; `totalSeconds`, when above 0: abort when the whole transfer takes
    /// longer (for a short answer, where a trickle that never ends is as bad as a stall).
    /// `method`, when given, replaces the request's method (PUT, PATCH, DELETE) with the body as above.
    public init(url: String, body: [UInt8]?, headers: [String], connectTimeoutSeconds: Int, stallSeconds: Int, totalSeconds: Int = 0,
                method: String? = nil) {
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        // The first transfer loads libcurl; one that cannot have it fails when started.
        guard confab_curl_load() == 0, let easy = confab_easy_init() else {
            handle = nil
            return
        }
        handle = easy
        confab_easy_setopt_string(easy, CURLOPT_URL, url)
        confab_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        confab_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        confab_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        confab_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        confab_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT, connectTimeoutSeconds)
        confab_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        confab_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, stallSeconds)
        confab_easy_setopt_string(easy, CURLOPT_USERAGENT, "confabd")
        confab_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if totalSeconds > 0 { confab_easy_setopt_long(easy, CURLOPT_TIMEOUT, totalSeconds) }
        if let body {
            confab_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            body.withUnsafeBytes { _ = confab_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
        } else {
            confab_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        }
        if let method { confab_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method) }
        // "Expect:" keeps curl from waiting for 100-continue on large prompts.
        for header in headers + ["Expect:"] { headerList = confab_slist_append(headerList, header) }
        confab_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, headerList)
        confab_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION) { pointer, size, count, userdata in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            let total = size * count
            // Returning anything but `total` makes curl end the transfer with CURLE_WRITE_ERROR.
            if transfer.abortRequested { return 0 }
            // Only record what arrived: acting on it here would run program logic inside curl,
            // where starting or removing a transfer is refused (CURLM_RECURSIVE_API_CALL).
            transfer.multi?.noteReceived(UnsafeRawBufferPointer(start: pointer, count: total), by: transfer)
            return total
        }
        confab_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
        confab_easy_setopt_closesocket_cb(easy) { clientp, socket in
            // Stop polling before the descriptor goes away: libuv must never watch a closed fd.
            if let clientp {
                Unmanaged<CurlMulti>.fromOpaque(clientp).takeUnretainedValue().forgetSocket(socket)
            }
            return close(socket)
        }
    }

    /// The HTTP status, once headers have arrived (0 before).
    public var responseCode: Int {
        var code: Int = 0
        guard let easy = handle else { return 0 }
        confab_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    /// Whether the request went out: false when the transfer ended while still connecting
    /// (resolving, TCP or the TLS handshake).
    public var requestSent: Bool {
        var bytes: Int = 0
        guard let easy = handle else { return false }
        confab_easy_getinfo_long(easy, CURLINFO_REQUEST_SIZE, &bytes)
        return bytes > 0
    }

    /// A response header's value (case-insensitive name), once headers have arrived.
    public func header(_ name: String) -> String? {
        var header: UnsafeMutablePointer<curl_header>?
        guard let easy = handle, confab_easy_header(easy, name, 0, UInt32(CURLH_HEADER), -1, &header) == CURLHE_OK, let header else { return nil }
        return String(cString: header.pointee.value)
    }

    fileprivate func outcome(_ code: CURLcode) -> CurlOutcome {
        let detail = String(cString: errorBuffer)
        let message = detail.isEmpty ? String(cString: confab_easy_strerror(code)) : detail
        return CurlOutcome(code: Int32(code.rawValue), message: message)
    }

    deinit {
        if let handle { confab_easy_cleanup(handle) }
        if let headerList { confab_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }
}

/// libcurl's multi interface driven by the libuv loop, after curl's multi-uv.c: one
/// timer for the whole multi handle, one poll handle per socket curl asks about.
public final class CurlMulti {
    /// Made with the first transfer, when libcurl is loaded: an idle daemon has none.
    private var multiHandle: UnsafeMutableRawPointer?
    /// Only once a transfer has started.
    private var multi: UnsafeMutableRawPointer { multiHandle! }
    public let loop: Loop
    private let timer: Timer
    private var polls: [curl_socket_t: Poll] = [:]
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// Transfers with body bytes waiting for delivery, in arrival order.
    private var transfersWithData: [CurlTransfer] = []
    /// Told about a curl_multi_* call that failed, for the daemon's log.
    public var onError: ((String) -> Void)?

    public init(loop: Loop) {
        self.loop = loop
        timer = Timer(loop: loop)
    }

    private func madeMulti() -> UnsafeMutableRawPointer? {
        if let multiHandle { return multiHandle }
        guard confab_curl_load() == 0, let multi = confab_multi_init() else { return nil }
        let this = Unmanaged.passUnretained(self).toOpaque()
        confab_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, this)
        confab_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, this)
        confab_multi_setopt_socket_cb(multi) { _, socket, what, userp, _ in
            Unmanaged<CurlMulti>.fromOpaque(userp!).takeUnretainedValue().watch(socket: socket, what: what)
            return 0
        }
        confab_multi_setopt_timer_cb(multi) { _, timeoutMilliseconds, userp in
            Unmanaged<CurlMulti>.fromOpaque(userp!).takeUnretainedValue().armTimer(timeoutMilliseconds)
            return 0
        }
        multiHandle = multi
        return multi
    }

    public var activeTransfers: Int { transfers.count }

    /// Starts a transfer. Its outcome, even a refusal to start, arrives on a later turn.
    public func start(_ transfer: CurlTransfer) {
        transfer.multi = self
        guard transfer.hasEasyHandle, let multi = madeMulti() else {
            let reason = String(cString: confab_curl_load_error())
            refuse(transfer, "libcurl cannot be loaded: " + (reason.isEmpty ? "curl_easy_init failed" : reason))
            return
        }
        confab_easy_setopt_pointer(transfer.easy, CURLOPT_CLOSESOCKETDATA, Unmanaged.passUnretained(self).toOpaque())
        transfers[transfer.easy] = transfer
        let rc = confab_multi_add_handle(multi, transfer.easy)
        guard rc != CURLM_OK else { return }
        transfers[transfer.easy] = nil
        refuse(transfer, "curl_multi_add_handle: " + String(cString: confab_multi_strerror(rc)))
    }

    private func refuse(_ transfer: CurlTransfer, _ message: String) {
        onError?(message)
        loop.onNextTurn { [weak transfer] in
            guard let transfer, !transfer.abortRequested, let completion = transfer.onComplete else { return }
            transfer.onComplete = nil
            transfer.onData = nil
            completion(CurlOutcome(code: Int32(CURLE_FAILED_INIT.rawValue), message: message))
        }
    }

    /// Ends a transfer now; its `onComplete` is not called. Safe from inside its `onData`.
    public func cancel(_ transfer: CurlTransfer) {
        guard transfer.hasEasyHandle, transfers[transfer.easy] != nil else {
            transfer.abortRequested = true
            transfer.onData = nil
            transfer.onComplete = nil
            return
        }
        transfer.abortRequested = true
        transfer.onData = nil
        transfer.onComplete = nil
        // Removing a handle from inside curl's own callback is not allowed; the write
        // callback returns 0 instead and the handle is reaped as a failed transfer.
        if !insideCurl {
            transfers[transfer.easy] = nil
            check(confab_multi_remove_handle(multi, transfer.easy), "curl_multi_remove_handle")
        }
    }

    private func check(_ rc: CURLMcode, _ call: String) {
        if rc != CURLM_OK { onError?(call + ": " + String(cString: confab_multi_strerror(rc))) }
    }

    fileprivate func noteReceived(_ bytes: UnsafeRawBufferPointer, by transfer: CurlTransfer) {
        if transfer.received.isEmpty { transfersWithData.append(transfer) }
        transfer.received.append(contentsOf: bytes)
    }

    /// Hands each transfer what arrived during the last socket action, curl no longer on the stack.
    private func deliverReceived() {
        while !transfersWithData.isEmpty {
            let batch = transfersWithData
            transfersWithData = []
            for transfer in batch {
                var bytes: [UInt8] = []
                swap(&bytes, &transfer.received)
                guard !transfer.abortRequested, let onData = transfer.onData else { continue }
                let keepGoing = bytes.withUnsafeBytes { onData($0) }
                if !keepGoing { cancel(transfer) }
                // Keep the allocation for the next piece.
                if transfer.received.isEmpty {
                    bytes.removeAll(keepingCapacity: true)
                    transfer.received = bytes
                }
            }
        }
    }

    /// Cancels everything and releases curl. The loop must still run afterwards so the poll handles close.
    public func close() {
        for transfer in Array(transfers.values) { cancel(transfer) }
        transfersWithData = []
        if let multiHandle { check(confab_multi_cleanup(multiHandle), "curl_multi_cleanup") }
        multiHandle = nil
        for poll in polls.values { poll.close() }
        polls = [:]
        timer.close()
    }

    private var insideCurl = false

    private func socketAction(_ socket: curl_socket_t, _ flags: Int32) {
        var running: Int32 = 0
        insideCurl = true
        let rc = confab_multi_socket_action(multi, socket, flags, &running)
        insideCurl = false
        check(rc, "curl_multi_socket_action")
        deliverReceived()
        reapFinished()
    }

    private func reapFinished() {
        var pending: Int32 = 0
        while let message = confab_multi_info_read(multi, &pending) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = confab_msg_result(message)
            // The message is invalid once the handle is removed: read it first.
            check(confab_multi_remove_handle(multi, easy), "curl_multi_remove_handle")
            guard let transfer = transfers.removeValue(forKey: easy) else { continue }
            if transfer.abortRequested { continue }
            let completion = transfer.onComplete
            transfer.onComplete = nil
            transfer.onData = nil
            completion?(transfer.outcome(code))
        }
    }

    private func watch(socket: curl_socket_t, what: Int32) {
        if what == CURL_POLL_REMOVE {
            // curl may announce removal of a socket it never registered: tolerate it.
            forgetSocket(socket)
            return
        }
        var events: PollEvents = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { events.insert(.readable) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { events.insert(.writable) }
        let poll: Poll
        if let existing = polls[socket] {
            poll = existing
        } else {
            guard let created = try? Poll(loop: loop, socket: socket) else { return }
            polls[socket] = created
            poll = created
        }
        poll.start(events) { [unowned self] status, ready in
            var flags: Int32 = 0
            if status < 0 { flags = CURL_CSELECT_ERR }
            if ready.contains(.readable) { flags |= CURL_CSELECT_IN }
            if ready.contains(.writable) { flags |= CURL_CSELECT_OUT }
            self.socketAction(socket, flags)
        }
    }

    fileprivate func forgetSocket(_ socket: curl_socket_t) {
        guard let poll = polls.removeValue(forKey: socket) else { return }
        poll.stop()
        poll.close()
    }

    private func armTimer(_ milliseconds: Int) {
        if milliseconds < 0 {
            timer.stop()
            return
        }
        // Never call back into curl from inside its timer callback: a 0 timeout fires next turn.
        timer.start(after: UInt64(milliseconds)) { [unowned self] in
            self.socketAction(CURL_SOCKET_BAD, 0)
        }
    }
}
