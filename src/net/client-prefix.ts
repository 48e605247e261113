import ipaddr from 'ipaddr.js';

/**
 * The part of a client address that names one client: the whole IPv4 address (`::ffff:` forms
 * included), the /64 of an IPv6 one (one site is handed a whole /64, so its addresses are one client).
 * With `ipv4Bits` an IPv4 client is its network of that size (/24 where a budget is per network).
 * Anything that cannot be parsed counts as itself.
 */
export function clientPrefix(address: string | undefined | null, ipv4Bits = 32): string {
  if (!address) return '';
  try {
    const ip = ipaddr.process(address);
    if (ip.kind() === 'ipv6') return `${ipaddr.IPv6.networkAddressFromCIDR(`${ip.toString()}/64`).toString()}/64`;
    return ipv4Bits >= 32 ? ip.toString() : `${ipaddr.IPv4.networkAddressFromCIDR(`${ip.toString()}/${ipv4Bits}`).toString()}/${ipv4Bits}`;
  } catch {
    return address;
  }
}
