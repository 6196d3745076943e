// HTTP/2 frames as the hot-path server writes and reads them (RFC 9113 §4, §6): frame types, flags, error codes and
// sizes, the 9-byte frame header, and gRPC's length-prefixed message (./unary-server.ts serves them).

export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
export const FRAME = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
};
export const WINDOW_UPDATE = 8;
export const CONTINUATION = 9;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 };
export const ERROR = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 11,
};

export const MAX_FRAME = 16_384;
export const MAX_WINDOW = 2 ** 31 - 1;
/** Larger requests are refused: a CheckRequest carries headers and at most a bounded body. */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export const GRPC_UNIMPLEMENTED = 12;
export const GRPC_INTERNAL = 13;
export const GRPC_RESOURCE_EXHAUSTED = 8;

export class ProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export function frameHeader(length: number, type: number, flags: number, stream: number): Buffer {
  const h = Buffer.allocUnsafe(9);
  writeFrameHeader(h, length, type, flags, stream);
  return h;
}

export function writeFrameHeader(h: Buffer, length: number, type: number, flags: number, stream: number): void {
  h.writeUIntBE(length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
}

/** A gRPC length-prefixed message (uncompressed), after `headroom` bytes left for the caller (an HTTP/2 frame header). */
export function frame(message: Uint8Array, headroom = 0): Buffer {
  const out = Buffer.allocUnsafe(headroom + 5 + message.byteLength);
  out[headroom] = 0;
  out.writeUInt32BE(message.byteLength, headroom + 1);
  out.set(message, headroom + 5);
  return out;
}
