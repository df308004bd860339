// Tailplane routing plugin in AssemblyScript, to prove a non-Go guest runs.
//
// - GET /old/<rest>        -> 308 Location: /new/<rest>   (http_handler only)
// - header X-Canary: always -> the route's second backend (tailplane_route_v1,
//   capability "route")
//
// It works on raw UTF-8 bytes in static buffers: no allocation per request.

@external("http_handler", "get_uri")
declare function get_uri(buf: usize, limit: u32): u32;
@external("http_handler", "get_header_values")
declare function get_header_values(kind: u32, name: usize, nameLen: u32, buf: usize, limit: u32): u64;
@external("http_handler", "set_header_value")
declare function set_header_value(kind: u32, name: usize, nameLen: u32, value: usize, valueLen: u32): void;
@external("http_handler", "set_status_code")
declare function set_status_code(code: u32): void;
@external("tailplane_route_v1", "get_backends")
declare function get_backends(buf: usize, limit: u32): u64;
@external("tailplane_route_v1", "set_backend")
declare function set_backend(name: usize, nameLen: u32): i32;

const BUF_SIZE: u32 = 2048;
const buf = memory.data(2048);
const out = memory.data(2048);

// "/old/", "/new/", "Location", "X-Canary", "always" as UTF-8.
const OLD = memory.data<u8>([0x2f, 0x6f, 0x6c, 0x64, 0x2f]);
const NEW = memory.data<u8>([0x2f, 0x6e, 0x65, 0x77, 0x2f]);
const LOCATION = memory.data<u8>([0x4c, 0x6f, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e]);
const CANARY = memory.data<u8>([0x58, 0x2d, 0x43, 0x61, 0x6e, 0x61, 0x72, 0x79]);
const ALWAYS = memory.data<u8>([0x61, 0x6c, 0x77, 0x61, 0x79, 0x73]);

export function handle_request(): i64 {
  const n = get_uri(buf, BUF_SIZE);
  if (n <= BUF_SIZE && n >= 5 && memory.compare(buf, OLD, 5) == 0) {
    memory.copy(out, NEW, 5);
    memory.copy(out + 5, buf + 5, n - 5);
    set_header_value(1, LOCATION, 8, out, n);
    set_status_code(308);
    return 0;
  }
  const r = get_header_values(0, CANARY, 8, buf, BUF_SIZE);
  const len = <u32>(r & 0xffffffff);
  // One value "always" followed by its NUL terminator.
  if ((r >> 32) >= 1 && len >= 7 && len <= BUF_SIZE && memory.compare(buf, ALWAYS, 6) == 0 && load<u8>(buf + 6) == 0) {
    const b = get_backends(buf, BUF_SIZE);
    const blen = <u32>(b & 0xffffffff);
    if ((b >> 32) >= 2 && blen <= BUF_SIZE) {
      let i: u32 = 0;
      while (load<u8>(buf + i) != 0) i++;
      const start = i + 1;
      let end = start;
      while (load<u8>(buf + end) != 0) end++;
      set_backend(buf + start, end - start);
    }
  }
  return 1;
}

export function handle_response(reqCtx: i32, isError: i32): void {}
