package io.gradsync.core;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The house sync-core is, checked on its compiled classes. Four floors, each using only the floors below it:
 * <ul>
 *   <li><b>base</b>: the API's values (data types, operators, gradient buffers, exceptions, idle strategies), the
 *       memory they live in, the settings, and the transport SPI;</li>
 *   <li><b>engine room</b>: the engine (the pump, the inbox, the ledger, the codec, the progress thread), the
 *       algorithms (plans) and the selector that picks them, the bootstrap, and the transports sync-core brings;</li>
 *   <li><b>facade</b>: the root-package classes that take a user's call, check it and hand a request to the
 *       engine room ({@link #FACADE});</li>
 *   <li><b>extensions</b> built on the facade: buckets, the timeline, the launcher, the check pattern.</li>
 * </ul>
 * Inside the engine room the engine knows no algorithm and the algorithms know no selector. What is private to a
 * package is package-private there (the compiler keeps that wall); these rules keep the ones between packages.
 * Nothing forms a cycle, counting the facade and every other root-package class on its own; and sync-core never
 * reaches into a transport module.
 */
class ArchitectureTest {
    private static final String CORE = "io.gradsync.core";
    private static final JavaClasses CLASSES = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages(CORE);

    /** The root-package classes that may reach past the base: the API's entry, its checks and its configuration. */
    private static final Set<String> FACADE = Set.of("Communicator", "AllReduceOperator", "CallArguments",
            "GradSyncConfiguration");
    private static final String[] ENGINE_ROOM = {CORE + ".engine..", CORE + ".algorithm..", CORE + ".select..",
        CORE + ".bootstrap..", CORE + ".transport.local..", CORE + ".transport.shm..", CORE + ".transport.auto.."};
    private static final String[] EXTENSIONS = {CORE + ".bucket..", CORE + ".trace..", CORE + ".launch..",
        CORE + ".check.."};

    private static final DescribedPredicate<JavaClass> FACADE_CLASSES = DescribedPredicate.describe("the facade",
            c -> c.getPackageName().equals(CORE) && FACADE.contains(outermost(c).getSimpleName()));
    private static final DescribedPredicate<JavaClass> BASE = DescribedPredicate.describe("the base",
            c -> c.getPackageName().equals(CORE) && !FACADE.contains(outermost(c).getSimpleName())
                    || c.getPackageName().equals(CORE + ".transport") || c.getPackageName().startsWith(CORE + ".memory")
                    || c.getPackageName().startsWith(CORE + ".settings"));

    @Test
    void eachFloorUsesOnlyTheFloorsBelowIt() {
        layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer("extensions").definedBy(EXTENSIONS)
                .layer("facade").definedBy(FACADE_CLASSES)
                .layer("engine room").definedBy(ENGINE_ROOM)
                .layer("base").definedBy(BASE)
                .whereLayer("extensions").mayOnlyBeAccessedByLayers("extensions")
                .whereLayer("facade").mayOnlyBeAccessedByLayers("extensions", "facade")
                .whereLayer("engine room").mayOnlyBeAccessedByLayers("extensions", "facade", "engine room")
                .check(CLASSES);
    }

    @Test
    void theEngineKnowsNoAlgorithmAndTheAlgorithmsNoSelector() {
        noClasses().that().resideInAPackage(CORE + ".engine..")
                .should().dependOnClassesThat().resideInAnyPackage(CORE + ".algorithm..", CORE + ".select..",
                        CORE + ".bootstrap..", CORE + ".transport.local..", CORE + ".transport.shm..", CORE + ".transport.auto..")
                .because("the pump runs any plan; which plan runs a call is decided above it")
                .check(CLASSES);
        noClasses().that().resideInAPackage(CORE + ".algorithm..")
                .should().dependOnClassesThat().resideInAnyPackage(CORE + ".select..", CORE + ".bootstrap..")
                .check(CLASSES);
    }

    @Test
    void theTransportSpiDependsOnNothingAboveIt() {
        noClasses().that().resideInAPackage(CORE + ".transport..")
                .should().dependOnClassesThat().resideInAnyPackage(CORE + ".bootstrap..", CORE + ".engine..",
                        CORE + ".algorithm..", CORE + ".select..", CORE + ".launch..", CORE + ".bucket..", CORE + ".trace..")
                .orShould().dependOnClassesThat().resideInAPackage(CORE)
                .because("transports implement a small SPI and a job context, as Gloo's transports see a Store")
                .check(CLASSES);
    }

    @Test
    void coreNeverReachesIntoAnotherModule() {
        noClasses().that().resideInAPackage(CORE + "..")
                .should().dependOnClassesThat().resideInAnyPackage("io.gradsync.aeron..", "io.gradsync.rdma..",
                        "io.gradsync.gpu..", "io.aeron..", "org.agrona..", "com.ibm..", "jcuda..")
                .because("modules depend inward: transports are found by name through ServiceLoader")
                .check(CLASSES);
    }

    /** Packages, the facade (whose operator and communicator call each other), and each other root-package class form no cycle. */
    @Test
    void nothingFormsACycle() {
        slices().assignedFrom(new SliceAssignment() {
            @Override
            public SliceIdentifier getIdentifierOf(JavaClass javaClass) {
                String pkg = javaClass.getPackageName();
                if (FACADE_CLASSES.test(javaClass)) {
                    return SliceIdentifier.of("the facade");
                }
                if (pkg.equals(CORE)) {
                    return SliceIdentifier.of("root class " + outermost(javaClass).getSimpleName());
                }
                if (pkg.startsWith(CORE + ".")) {
                    String rest = pkg.substring(CORE.length() + 1);
                    int dot = rest.indexOf('.');
                    return SliceIdentifier.of(dot < 0 ? rest : rest.substring(0, dot));
                }
                return SliceIdentifier.ignore();
            }

            @Override
            public String getDescription() {
                return "sync-core's packages, the facade, and each other root-package class on its own";
            }
        }).should().beFreeOfCycles().check(CLASSES);
    }

    private static JavaClass outermost(JavaClass c) {
        JavaClass outer = c;
        while (outer.getEnclosingClass().isPresent()) {
            outer = outer.getEnclosingClass().get();
        }
        return outer;
    }
}
