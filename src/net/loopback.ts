import ipaddr from 'ipaddr.js';

/** 127.0.0.0/8, ::1 and their IPv4-mapped spellings (::ffff:127.0.0.1, as a dual-stack socket reports it). */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  if (address === 'localhost') return true;
  try {
    return ipaddr.process(address).range() === 'loopback';
  } catch {
    return false;
  }
}
