import type Router from '@koa/router';
import type { Config } from '../../config';

/**
 * What a dashboard needs to know before anyone signs in: which integrations this deployment has.
 * None of billing, OAuth sign-in or S3 uploads is configured in this version; they answer false.
 */
export function configRoutes(router: Router, config: Config): void {
  const oauthProviders: string[] = [];
  router.get('/config', (ctx) => {
    ctx.body = {
      signup: !config.DISABLE_SIGNUP,
      billing: false,
      oauth: { providers: oauthProviders },
      snsDeliveryEvents: true,
      s3Uploads: false,
      devMailbox: !config.SMTP_URL,
    };
  });
  router.get('/auth/oauth-config', (ctx) => {
    ctx.body = { providers: oauthProviders };
  });
}
