import Foundation

/// Names `/etc/hosts` maps to a loopback address (127.0.0.0/8 or ::1): c-ares answers them from
/// the file, without a query.
public func loopbackNamesInHostsFile(path: String = "/etc/hosts") -> [String] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
    var names: [String] = []
    for line in text.split(separator: "\n") {
        let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard fields.count >= 2 else { continue }
        let address = fields[0]
        guard address.hasPrefix("127.") || address == "::1" else { continue }
        for name in fields.dropFirst() where !names.contains(String(name)) {
            names.append(String(name))
        }
    }
    return names
}
