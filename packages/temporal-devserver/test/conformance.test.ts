import { conformanceSuite } from './conformance';

conformanceSuite('dev server, in memory');
