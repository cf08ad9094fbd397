// SPDX-License-Identifier: Apache-2.0
import CMicroHTTPD

// C callbacks for libmicrohttpd. They are plain functions outside main.swift
// (a closure there would be main-actor isolated and trap on a request thread),
// and reach their Swift object through the `cls` pointer.

let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, contextSlot in
    guard let cls, let connection, let url, let method, let uploadSize, let contextSlot else { return .NO }
    let server = Unmanaged<Server>.fromOpaque(cls).takeUnretainedValue()
    return server.access(connection: connection, url: url, method: method, uploadData: uploadData,
                         uploadSize: uploadSize, contextSlot: contextSlot)
}

let requestCompleted: MHD_RequestCompletedCallback = { cls, _, contextSlot, _ in
    guard let cls else { return }
    Unmanaged<Server>.fromOpaque(cls).takeUnretainedValue().completed(contextSlot: contextSlot)
}

let connectionNotify: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let cls, let connection, let socketContext else { return }
    Unmanaged<Server>.fromOpaque(cls).takeUnretainedValue()
        .connectionEvent(connection, socketContext, started: code == MHD_ConnectionNotificationCode(rawValue: 0) /* MHD_CONNECTION_NOTIFY_STARTED */)
}

let collectValue: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let box = Unmanaged<ValueCollector>.fromOpaque(cls).takeUnretainedValue()
    let name = String(cString: key)
    box.values.append((box.lowercased ? name.lowercased() : name, value.map { String(cString: $0) } ?? ""))
    return .YES
}

let streamRead: MHD_ContentReaderCallback = { cls, _, buffer, max in
    guard let cls, let buffer else { return -2 }
    let binding = Unmanaged<StreamBinding>.fromOpaque(cls).takeUnretainedValue()
    return binding.stream.read(into: buffer, max: max, connection: binding.connection)
}

let streamFree: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let binding = Unmanaged<StreamBinding>.fromOpaque(cls).takeRetainedValue()
    binding.server.streamFinished(binding)
}

let lentBytesFree: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<LentBytes>.fromOpaque(cls).release()
}
