import { queryChoice, queryInt } from './query';

const MAX_PAGE_SIZE = 100;

/** Offset pagination's query: `page` (default 1, at least 1) and `pageSize` (default 20, 1-100); unusable values fall back to the defaults. */
export const pageQuery = {
  page: queryInt({ default: 1, min: 1, belowMin: 'default', description: 'Page number, from 1.' }),
  pageSize: queryInt({ default: 20, min: 1, max: MAX_PAGE_SIZE, belowMin: 'default', description: 'Items per page.' }),
};

/** `sort` among the allowed columns (else the default) and `dir` asc|desc, any case (else desc); read as the SQL column and direction. */
export function sortQuery<const C extends Record<string, string>>(columns: C, fallback: keyof C & string) {
  const names = Object.keys(columns) as Array<keyof C & string>;
  return {
    sort: queryChoice(names, fallback, { description: 'Field to sort by.' }).transform((name) => columns[name]),
    dir: queryChoice(['asc', 'desc'], 'desc', { caseInsensitive: true, description: 'Sort direction.' }).transform((d) => d.toUpperCase() as 'ASC' | 'DESC'),
  };
}
