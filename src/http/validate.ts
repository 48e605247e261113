// Request validation lives in the base (src/validation.ts), so services that validate what they are handed need no HTTP import.
export { emailSchema, MAX_JSON_DEPTH, parse, uuidPath } from '../validation';
