/** A LIKE / ILIKE pattern matching `text` anywhere: its own `%`, `_` and `\` match only themselves. */
export const containsPattern = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
