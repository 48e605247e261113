import type Router from '@koa/router';
import type { Config } from '../../config';

/**
 * What a dashboard needs to know before anyone signs in: which integrations this deployment has.
 * Billing is on with STRIPE_SECRET_KEY, S3 uploads with S3_BUCKET; OAuth sign-in is not built in this version.
 */
export function configRoutes(router: Router, config: Config): void {
  const oauthProviders: string[] = [];
  router.get('/config', (ctx) => {
    ctx.body = {
      signup: !config.DISABLE_SIGNUP,
      billing: Boolean(config.STRIPE_SECRET_KEY),
      oauth: { providers: oauthProviders },
      snsDeliveryEvents: true,
      s3Uploads: Boolean(config.S3_BUCKET),
      devMailbox: !config.SMTP_URL,
    };
  });
  router.get('/auth/oauth-config', (ctx) => {
    ctx.body = { providers: oauthProviders };
  });
}
