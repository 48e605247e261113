/** The part of the `mjml` package (5.x, which ships no types) that the service calls. */
declare module 'mjml' {
  interface MjmlOptions {
    validationLevel?: 'strict' | 'soft' | 'skip';
    ignoreIncludes?: boolean;
  }
  interface MjmlResult {
    html: string;
    errors: Array<{ line: number; message: string; tagName: string; formattedMessage: string }>;
  }
  export default function mjml2html(source: string, options?: MjmlOptions): Promise<MjmlResult>;
}
